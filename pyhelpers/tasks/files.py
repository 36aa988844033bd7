"""Task files (TRAIN_TASKS / VAL_TASKS): JSONL, one task per line, schema `task` (M19).

`load_tasks` validates every line and names the line number of the first problem; `write_tasks`
validates, then writes atomically (sorted keys, UTF-8), so a file on disk is always complete and
valid. Used by `pyhelpers data build|check`, doctor's data check, the eval runner and the plugin.
Stdlib (+ jsonschema, lazily, through jsonfiles) only.
"""

from __future__ import annotations

import json
from pathlib import Path

from pyhelpers.errors import ToolkitError
from pyhelpers.jsonfiles import validation_errors, write_bytes_atomic

FIX = "rebuild it with `pyhelpers data build`; schema: pyhelpers/schemas/task.schema.json"


def parse_task_line(line: str, where: str) -> dict:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ToolkitError(f"not valid JSON (column {exc.colno}: {exc.msg})", where, FIX) from None
    errs = validation_errors(obj, "task")
    if errs:
        more = f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
        raise ToolkitError("invalid task", f"{where}: {errs[0]}{more}", FIX)
    return obj


def load_tasks(path: Path, split: str | None = None) -> list[dict]:
    """Every task of a JSONL file, validated; `split` also checks each line's split field.
    Task ids must be unique. Blank lines are allowed."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ToolkitError("task file not found", str(path), "run `pyhelpers data build` or fix the path") from None
    except UnicodeDecodeError as exc:
        raise ToolkitError(f"task file is not UTF-8 ({exc.reason})", str(path), FIX) from None
    tasks, seen = [], {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path} line {n}"
        task = parse_task_line(line, where)
        if split is not None and task["split"] != split:
            raise ToolkitError(f"task has split {task['split']!r}, expected {split!r}", where, FIX)
        if task["task_id"] in seen:
            raise ToolkitError(f"duplicate task_id {task['task_id']!r} (first on line {seen[task['task_id']]})",
                               where, FIX)
        seen[task["task_id"]] = n
        tasks.append(task)
    return tasks


def check_disjoint(train: list[dict], val: list[dict], where: str = "") -> None:
    """Train and val share no task id and no ShopSimulator task index."""
    ids = {t["task_id"] for t in train} & {t["task_id"] for t in val}
    idx = {t["shopsim_idx"] for t in train} & {t["shopsim_idx"] for t in val}
    if ids or idx:
        sample = sorted(ids)[:3] or sorted(idx)[:3]
        raise ToolkitError(f"train and val overlap ({len(ids)} task ids, {len(idx)} task indices, e.g. {sample})",
                           where or "task files", FIX)


def dumps_tasks(tasks: list[dict]) -> bytes:
    return "".join(json.dumps(t, ensure_ascii=False, sort_keys=True) + "\n" for t in tasks).encode("utf-8")


def write_tasks(path: Path, tasks: list[dict]) -> None:
    """Validate every task, then write the JSONL file atomically."""
    for n, task in enumerate(tasks, 1):
        errs = validation_errors(task, "task")
        if errs:
            raise ToolkitError("invalid task", f"{path} line {n} (not written): {errs[0]}", "this is a bug in the builder")
    write_bytes_atomic(Path(path), dumps_tasks(tasks))
