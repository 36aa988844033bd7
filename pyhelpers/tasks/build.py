"""Build train/val task files from ShopSimulator's published dataset files (M19).

Inputs are the `fine_items_*` files as published (HF wpei/ShopSimulator: fine_items_{eval,train}_
{standard,persona}.jsonl, fine_items_eval_train_all.jsonl; the repo: fine_items_eval_train_all.
json.gz), JSON arrays or JSONL, gzipped or not. Each record is a product with `instructions:
[{instruction, instruction_simple, attributes, instruction_options, ...}]`.

ShopSimulator task index (`shopsim_idx`, the `idx` of reset) = the position of the goal in the
list the server builds at start (engine.load_products + goal.get_existed_goals, fork @1487f67):
records in file order, skipping asin "nan", asins longer than 20 characters and repeated asins
(the first wins); then one goal per entry of `instructions`, all of a record's goals skipped when
its FIRST instruction has no attributes (upstream uses instructions[0].attributes for every goal of
the record). The server loads ONE file (shop_env/data/items_eval_train.json = the eval+train "all"
file). So:
- with a server file (`server_file`, or an `*_all*` file found in a source directory), indices are
  looked up in it by (asin, instruction): exact;
- without one, the sources are enumerated as one list, eval-named files first, then train-named,
  then the rest: correct only if the server's file is exactly that concatenation. The build report
  says which basis was used. Caution (ShopSimulator's published data): an audit counts eval 1459 + train
  21962 records and a downstream project reports eval = indices 0–1458, yet upstream's single-turn
  config runs 1495 tasks; check a few indices against the running server before trusting numbers.

Split: files named fine_items_eval_* go to val, fine_items_train_* to train (the published split;
eval tasks never reach train). Goals from other files are split by a seeded hash of the task id
(val_share or val_count), or by `eval_tasks` (indices below it are the published eval). With a
published val split, val_count/val_share take a seeded subset of it. task_id = "<asin>-<k>" (k =
position in the record's instructions; "-p" appended for persona tasks), so the split is
disjoint by task id. Pure: no clock, same inputs -> same bytes.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pyhelpers.errors import ToolkitError
from pyhelpers.tasks.files import SLIME_PROMPT_KEY, slime_prompt

SOURCE_FIX = "use ShopSimulator's published fine_items_* files (JSON array or JSONL, optionally .gz)"
SUFFIXES = (".json", ".jsonl", ".json.gz", ".jsonl.gz")


def read_records(path: Path) -> list[dict]:
    """Product records of one file; errors name the line (JSONL) or the record (JSON array)."""
    path = Path(path)
    try:
        data = gzip.open(path, "rb").read() if path.name.endswith(".gz") else path.read_bytes()
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise ToolkitError("dataset file not found", str(path), SOURCE_FIX) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolkitError(f"cannot read dataset file ({exc})", str(path), SOURCE_FIX) from None
    if text.lstrip().startswith("["):
        try:
            recs = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ToolkitError(f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
                               str(path), SOURCE_FIX) from None
        where = [f"{path} record {i}" for i in range(len(recs))]
    else:
        recs, where = [], []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                recs.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ToolkitError(f"not valid JSON (column {exc.colno}: {exc.msg})", f"{path} line {n}",
                                   SOURCE_FIX) from None
            where.append(f"{path} line {n}")
    for rec, w in zip(recs, where, strict=True):
        _check_record(rec, w)
    return recs


def _check_record(rec, where: str) -> None:
    if not isinstance(rec, dict):
        raise ToolkitError("record is not a JSON object", where, SOURCE_FIX)
    if "asin" not in rec:
        raise ToolkitError("record has no asin", where, SOURCE_FIX)
    ins = rec.get("instructions")
    if not isinstance(ins, list) or not ins or not all(isinstance(i, dict) and isinstance(i.get("instruction"), str)
                                                      for i in ins):
        raise ToolkitError("record has no instructions list with an 'instruction' text in each entry",
                           where, SOURCE_FIX)


def published_split(path: Path) -> str | None:
    """'val' for fine_items_eval_*, 'train' for fine_items_train_*, None for the combined/other files."""
    name = Path(path).name.lower()
    has_eval, has_train = "eval" in name, "train" in name
    if has_eval and not has_train:
        return "val"
    if has_train and not has_eval:
        return "train"
    return None


def is_combined(path: Path) -> bool:
    name = Path(path).name.lower()
    return "_all" in name or name.startswith("items_eval_train")


def file_scenario(path: Path) -> str:
    return "persona" if "persona" in Path(path).name.lower() else "standard"


@dataclass
class Goal:
    """One goal as the server enumerates it; `idx` is its position in that enumeration."""
    idx: int
    record: dict
    k: int
    attributes: list


def enumerate_goals(records: list[dict], skipped: Counter | None = None) -> list[Goal]:
    skipped = skipped if skipped is not None else Counter()
    seen, goals = set(), []
    for rec in records:
        asin = str(rec["asin"])
        if asin == "nan" or len(asin) > 20:
            skipped["bad_asin"] += 1
            continue
        if asin in seen:
            skipped["duplicate_asin"] += 1
            continue
        seen.add(asin)
        attrs = rec["instructions"][0].get("attributes") or []
        if not attrs:
            skipped["no_attributes"] += len(rec["instructions"])
            continue
        for k in range(len(rec["instructions"])):
            goals.append(Goal(len(goals), rec, k=k, attributes=list(attrs)))
    return goals


def expand_sources(sources: list[Path], scenario: str) -> tuple[list[Path], Path | None]:
    """Files to read, and the server's file when a directory holds one next to split files."""
    files, server = [], None
    for src in map(Path, sources):
        if src.is_dir():
            found = sorted(p for p in src.iterdir() if p.name.startswith(("fine_items_", "items_eval_train"))
                           and p.name.endswith(SUFFIXES))
            split_files = [p for p in found if not is_combined(p)]
            combined = [p for p in found if is_combined(p)]
            if split_files and combined:
                server = server or combined[0]
            files += split_files or combined[:1]
            if not found:
                raise ToolkitError("no fine_items_* files in directory", str(src), SOURCE_FIX)
        elif src.is_file():
            files.append(src)
        else:
            raise ToolkitError("dataset source not found", str(src), SOURCE_FIX)
    if scenario != "all":
        files = [f for f in files if is_combined(f) or file_scenario(f) == scenario]
    if not files:
        raise ToolkitError(f"no dataset files for scenario {scenario!r}", ", ".join(map(str, sources)), SOURCE_FIX)
    return files, server


def _order(path: Path) -> int:
    return {"val": 0, "train": 1}.get(published_split(path) or "", 2)


def _hash(seed: int, task_id: str) -> str:
    return hashlib.sha256(f"{seed}:{task_id}".encode()).hexdigest()


def task_record(goal: Goal, idx: int, split: str, scenario: str) -> dict:
    rec, ins = goal.record, goal.record["instructions"][goal.k]
    safe = re.sub(r"[^A-Za-z0-9._:-]", "_", str(rec["asin"]))
    task = {"task_id": f"{safe}-{goal.k}" + ("-p" if scenario == "persona" else ""), "shopsim_idx": idx,
            "split": split, "scenario": scenario, "instruction": ins["instruction"],
            "instruction_simple": str(ins.get("instruction_simple") or ""),
            "attributes": [str(a) for a in goal.attributes], "goal_options": ins.get("instruction_options", []),
            "asin": str(rec["asin"]), "category": str(rec.get("category", "")),
            SLIME_PROMPT_KEY: slime_prompt(ins["instruction"])}
    if scenario == "persona":
        persona = rec.get("user_persona") if isinstance(rec.get("user_persona"), dict) else {}
        task["persona"] = {k: v for k, v in persona.items() if k != "__reasoning__"} or None
    return task


@dataclass
class BuildResult:
    train: list[dict]
    val: list[dict]
    report: dict = field(default_factory=dict)


def build(sources: list[Path], *, server_file: Path | None = None, scenario: str = "standard",
          val_share: float | None = None, val_count: int | None = None, eval_tasks: int | None = None,
          seed: int = 0) -> BuildResult:
    if val_share is not None and val_count is not None:
        raise ToolkitError("both --val-share and --val-count given", "pyhelpers data build", "give one of them")
    if val_share is not None and not 0 < val_share < 1:
        raise ToolkitError(f"--val-share must be between 0 and 1, got {val_share}", "pyhelpers data build",
                           "e.g. --val-share 0.1")
    files, found_server = expand_sources(sources, scenario)
    server_file = Path(server_file) if server_file else found_server
    files.sort(key=_order)  # stable: eval files, train files, others; given order within each
    skipped: Counter = Counter()
    per_file = [(f, read_records(f)) for f in files]
    if server_file is not None:
        basis_records = read_records(server_file)
        basis = f"server file {server_file.name} (exact)"
    elif len(per_file) == 1 and is_combined(per_file[0][0]):
        basis_records = per_file[0][1]
        basis = f"{per_file[0][0].name} itself (exact if the server loads this file as items_eval_train.json)"
    else:
        basis_records = [rec for _, recs in per_file for rec in recs]
        basis = ("sources enumerated as one list: " + ", ".join(f.name for f, _ in per_file)
                 + " (assumes the server loads exactly these records in this order)")
    index: dict = {}
    for g in enumerate_goals(basis_records):
        index.setdefault((str(g.record["asin"]), g.record["instructions"][g.k]["instruction"]), g.idx)
    tasks, seen_ids = [], set()
    for f, recs in per_file:
        goals = enumerate_goals(recs, skipped)
        fscen = scenario if is_combined(f) or scenario != "all" else file_scenario(f)
        fscen = "standard" if fscen == "all" else fscen
        for g in goals:
            if fscen == "persona" and not g.record.get("user_persona"):
                skipped["no_persona"] += 1
                continue
            key = (str(g.record["asin"]), g.record["instructions"][g.k]["instruction"])
            idx = index.get(key)
            if idx is None:
                skipped["not_in_server_file"] += 1
                continue
            label = published_split(f)
            if label is None and eval_tasks is not None:
                label = "val" if idx < eval_tasks else "train"
            task = task_record(g, idx, split=label or "train", scenario=fscen)
            if task["task_id"] in seen_ids:
                skipped["duplicate_task"] += 1
                continue
            seen_ids.add(task["task_id"])
            tasks.append((label, task))
    unlabeled = [t for lab, t in tasks if lab is None]
    val = [t for lab, t in tasks if lab == "val"]
    train = [t for lab, t in tasks if lab == "train"]
    unused = 0
    if unlabeled:
        if val_share is None and val_count is None:
            raise ToolkitError(f"{len(unlabeled)} tasks come from files without a published split",
                               ", ".join(f.name for f, _ in per_file if published_split(f) is None),
                               "pass --val-share or --val-count (seeded split), or --eval-tasks N")
        ranked = sorted(unlabeled, key=lambda t: _hash(seed, t["task_id"]))
        n = val_count if val_count is not None else round(val_share * len(ranked))
        val += ranked[:n]
        train += ranked[n:]
    elif val_share is not None or val_count is not None:
        ranked = sorted(val, key=lambda t: _hash(seed, t["task_id"]))
        n = val_count if val_count is not None else round(val_share * len(ranked))
        val, unused = ranked[:n], len(ranked) - min(n, len(ranked))
    for t in val:
        t["split"] = "val"
    for t in train:
        t["split"] = "train"
    val.sort(key=lambda t: (t["shopsim_idx"], t["task_id"]))
    train.sort(key=lambda t: (t["shopsim_idx"], t["task_id"]))
    report = {"sources": [{"file": f.name, "records": len(r), "split": published_split(f) or "unlabeled",
                           "sha256": hashlib.sha256(f.read_bytes()).hexdigest()} for f, r in per_file],
              "index_basis": basis, "scenario": scenario, "seed": seed, "val_share": val_share,
              "val_count": val_count, "eval_tasks": eval_tasks, "train": len(train), "val": len(val),
              "published_val_unused": unused, "skipped": dict(sorted(skipped.items()))}
    return BuildResult(train=train, val=val, report=report)
