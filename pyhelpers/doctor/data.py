"""Task files (M19): TRAIN_TASKS and VAL_TASKS exist, every line is a valid `task`
(pyhelpers/schemas/task.schema.json), each file holds its own split, the two are disjoint, and
every train line carries the `messages` prompt slime's Dataset reads (pyhelpers/tasks/files.py)."""

from __future__ import annotations

import json
from pathlib import Path

from pyhelpers.doctor.base import FAIL, PASS, Context, Result, result
from pyhelpers.jsonfiles import validation_errors
from pyhelpers.tasks.files import slime_prompt_problem

SHOWN = 5  # errors listed per file; the rest are counted
# (The fixes name the knob and file: make train's preflight shows a failure's fix without what was found.)
MISSING = ("build the task files as docs/training.md describes, or copy data/ from the old machine "
           "(M19: data/ is not in git), or point {knob} at them")
REBUILD = ("fix the lines of {path} that `make doctor` names, or rebuild the task files as docs/training.md "
           "describes, or copy data/ from the old machine (M19: data/ is not in git)")


def scan(path: Path, split: str) -> tuple[list[str], set[str], int]:
    """(errors as 'file:line: message', task ids, lines) of one JSONL task file."""
    errors, ids, n = [], set(), 0
    with path.open(encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):  # noqa: B007 - n is the count after the loop
            where = f"{path}:{n}"
            if not line.strip():
                errors.append(f"{where}: empty line")
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                errors.append(f"{where}: not JSON ({exc.msg}, column {exc.colno})")
                continue
            errs = validation_errors(obj, "task")
            if errs:
                errors.append(f"{where}: {errs[0]}" + (f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""))
                continue
            if obj["split"] != split:
                errors.append(f"{where}: split {obj['split']!r} in the {split} file")
            problem = slime_prompt_problem(obj) if split == "train" else None  # slime reads TRAIN_TASKS itself
            if problem:
                errors.append(f"{where}: {problem}")
            if obj["task_id"] in ids:
                errors.append(f"{where}: task_id {obj['task_id']!r} repeated")
            ids.add(obj["task_id"])
    return errors, ids, n


def check_data(ctx: Context) -> list[Result]:
    out, ids = [], {}
    for knob, split in (("TRAIN_TASKS", "train"), ("VAL_TASKS", "val")):
        name = f"{split}-tasks"
        path = ctx.path(knob)
        if not path.is_file():
            out.append(result(name, FAIL, f"{knob}={path} does not exist", fix=MISSING.format(knob=knob)))
            continue
        errors, ids[split], n = scan(path, split)
        if split == "val" and "train" in ids:
            both = sorted(ids["train"] & ids["val"])
            if both:
                errors.append(f"{path}: {len(both)} task_id(s) also in TRAIN_TASKS, e.g. {both[0]!r} "
                              "(train and val must be disjoint)")
        if not n:
            errors.append(f"{path}: empty file")
        if errors:
            more = [f"... and {len(errors) - SHOWN} more error(s)"] if len(errors) > SHOWN else []
            out.append(result(name, FAIL, f"{knob}: {len(errors)} error(s); first: {errors[0]}", fix=REBUILD.format(path=path),
                              details=errors[:SHOWN] + more))
        else:
            out.append(result(name, PASS, f"{knob}={path}: {n} valid task(s)"))
    return out
