"""The run's event log, runs/<RUN_NAME>/events.jsonl: what happened when, one JSON line each.

Artifacts decide where a run stands (runstate); this log only tells people (and `make status`,
the report's timeline, the round-overhead benchmark) when things happened: stage start/end with
its exit status, job submitted/ended, conversion, server ready, restarts. Times live here, never
in banks or summaries, so those stay comparable byte for byte.

One `write()` of one line in append mode: lines from concurrent writers never interleave
(O_APPEND, and a line is far below PIPE_BUF-sized writes' practical limits on local files).
Stdlib only.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

NAME = "events.jsonl"


def path(run_dir: Path) -> Path:
    return Path(run_dir) / NAME


def append(run_dir: Path, kind: str, **fields) -> dict:
    """Record one event with the wall-clock time (t, seconds since the epoch) and local time."""
    now = time.time()
    event = {"t": round(now, 3), "at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(now)), "kind": kind,
             **fields}
    p = path(run_dir)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(event, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))
    finally:
        os.close(fd)
    return event


def read(run_dir: Path) -> list[dict]:
    """Every event in order; a torn last line (a writer killed mid-write) is skipped."""
    p = path(run_dir)
    if not p.is_file():
        return []
    out = []
    for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def unfinished_stage(evs: list[dict]) -> dict | None:
    """The stage-start that never got its stage-end (nor a later `driver-lost` note): while a
    driver runs, the stage in progress; without one, the stage its driver died in."""
    open_: dict = {}
    for e in evs:
        key = (e.get("round"), e.get("stage"))
        if e.get("kind") == "stage-start":
            open_[key] = e
        elif e.get("kind") == "stage-end":
            open_.pop(key, None)
        elif e.get("kind") == "driver-lost":
            open_.clear()
    return max(open_.values(), key=lambda e: e["t"]) if open_ else None
