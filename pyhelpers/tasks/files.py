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
# The field slime's Dataset reads as each Sample's prompt (--input-key, pyhelpers/rollout/flags.py).
# Qwen3.5 is an image-text model: transformers hands slime a processor for it, and slime's Dataset
# then asserts that every prompt is a list of messages (slime 624b824, slime/utils/data.py:259-264),
# before the first rollout. The plugin never uses it: it builds its own prompt from the task record.
SLIME_PROMPT_KEY = "messages"


def slime_prompt(instruction: str) -> list[dict]:
    """The `messages` value of a task line: the instruction as one user message."""
    return [{"role": "user", "content": instruction}]


def slime_prompt_problem(task: dict) -> str | None:
    """Why slime could not read this task line's prompt, or None."""
    value = task.get(SLIME_PROMPT_KEY)
    if isinstance(value, list) and value:
        return None
    return (f"no `{SLIME_PROMPT_KEY}` list: slime's Dataset takes each prompt from it (--input-key "
            f"{SLIME_PROMPT_KEY}) and asserts a list for Qwen3.5; task files built before that field existed lack it")



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


def check_slime_prompts(path: Path) -> None:
    """Every line of TRAIN_TASKS is a valid task carrying the prompt slime reads (checked before
    the job starts: slime would stop at its first rollout-less assertion instead)."""
    load_tasks(path)
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        problem = slime_prompt_problem(json.loads(line)) if line.strip() else None
        if problem:
            raise ToolkitError(problem, f"{path} line {n}",
                               "rebuild the task files with `pyhelpers data build` (docs/training.md, Task data)")
