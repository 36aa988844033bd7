"""Pruning the run's Ray temp dir: each `ray start` leaves a session_<date>_<pid> directory
(logs, sockets, runtime envs; ray 2.60.0 _private/node.py:203-206, 775-790) that Ray never
removes -- one temp dir held 24 sessions (46 MB) after an afternoon, and /tmp is often the small
system disk.

Only sessions this run's own head created are ever touched: each is recorded in
runs/<RUN>/ray/sessions when the head is up (the session_latest it points to, created by a
process of the head's group). A temp dir shared with anything else (RAY_TEMP_DIR set to a common
place) therefore loses nothing of another's. Before the head starts, all but the newest KEEP
recorded sessions are removed, never the one session_latest names and never one a live process
still references (an orphan's logs).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pyhelpers.jsonfiles import write_bytes_atomic
from pyhelpers.procs import procfs
from pyhelpers.run import layout

KEEP = 3  # a crashed round's logs stay readable after a restart or two


def recorded(run_dir: Path) -> list[str]:
    try:
        return [ln for ln in layout.ray_sessions(run_dir).read_text().split() if ln.startswith("session_")]
    except OSError:
        return []


def _write(run_dir: Path, names: list[str]) -> None:
    layout.ray_sessions(run_dir).parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(layout.ray_sessions(run_dir), "".join(f"{n}\n" for n in names).encode())


def latest(temp_dir: str | Path) -> str | None:
    """The name of the session `session_latest` points to, if any."""
    try:
        return Path(os.readlink(Path(temp_dir) / "session_latest")).name
    except OSError:
        return None


def record(run_dir: Path, temp_dir: str | Path, head_pids: set[int]) -> str | None:
    """Record the session the head just started (its name ends in the pid of `ray start`, a member
    of head_pids). Returns its name, or None when session_latest is not the head's."""
    name = latest(temp_dir)
    if not name or not name.rpartition("_")[2].isdigit() or int(name.rpartition("_")[2]) not in head_pids:
        return None
    names = recorded(run_dir)
    if name not in names:
        _write(run_dir, [*names, name])
    return name


def prune(run_dir: Path, temp_dir: str | Path, keep: int = KEEP) -> list[str]:
    """Remove the run's recorded sessions beyond the newest `keep`. Returns the names removed."""
    temp = Path(temp_dir)
    names = recorded(run_dir)
    # The name starts with the start time (microseconds), so name order is age order.
    present = sorted(n for n in names if (temp / n).is_dir())
    spared = {latest(temp)}
    removed = []
    for name in present[:max(len(present) - keep, 0)]:
        if name in spared or procfs.marker_matches(temp / name):
            continue
        shutil.rmtree(temp / name, ignore_errors=True)
        if not (temp / name).exists():
            removed.append(name)
    gone = set(removed) | {n for n in names if not (temp / n).is_dir()}
    if gone:
        _write(run_dir, [n for n in names if n not in gone])
    return removed
