"""The run lock: one driver per run, held with flock (architecture §5).

The bash driver runs `pyhelpers proc hold-lock` as a coprocess (take_run_lock in bin/lib.sh),
which opens `runs/<RUN_NAME>/lock`, takes the flock with `take()` and holds it until TERM, or
until the driver dies: PR_SET_PDEATHSIG makes the kernel kill it with the driver. The lock is
never a descriptor of the driver shell itself: every `$(...)` and `&` of the driver forks a shell
that would inherit it and keep the run locked after the driver died. The holder recorded in the
file (in place: a rename would swap the inode the lock lives on) is the driver: its pid, start
time, host, start date and command; `make stop` signals that pid.

flock rather than the filelock package (in the venv): the lock must follow the driver's life,
which a coprocess with a parent-death signal gives and a lock object inside one Python call
does not.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from datetime import datetime
from pathlib import Path

from pyhelpers.errors import ToolkitError
from pyhelpers.procs import procfs
from pyhelpers.run.hints import for_rehearsal


def _holder(pid: int) -> dict:
    return {"pid": pid, "start_ticks": procfs.start_ticks(pid), "host": procfs.hostname(),
            "since": datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": procfs.cmdline(pid, limit=300)}


def _parse(raw: bytes) -> dict | None:
    try:
        info = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return info if isinstance(info, dict) and isinstance(info.get("pid"), int) else None


def read_holder(lock_path: Path, tries: int = 5) -> dict | None:
    """The recorded holder, or None. Retries briefly: a new holder rewrites the file in place."""
    for i in range(tries):
        try:
            info = _parse(Path(lock_path).read_bytes())
        except FileNotFoundError:
            return None
        if info or i == tries - 1:
            return info
        time.sleep(0.05)
    return None


def holder_alive(info: dict) -> bool:
    """True when the recorded holder is a live process on this host with its recorded start time."""
    return info.get("host") == procfs.hostname() and procfs.is_alive(info["pid"], info.get("start_ticks"))


def lock_free(lock_path: Path) -> bool:
    """True when no process holds the run lock (probed with a non-blocking flock, then released)."""
    try:
        fd = os.open(lock_path, os.O_RDWR)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing drops a lock we took
    return True


def live_holder(lock_path: Path) -> dict | None:
    """The holder record of a driver that holds the lock now, on this host; else None."""
    info = read_holder(lock_path)
    return info if info and not lock_free(lock_path) and holder_alive(info) else None


def require_free(lock_path: Path) -> None:
    """Raise the refusal (who holds it, how to stop it) unless the lock is free."""
    if not lock_free(lock_path):
        raise refusal(lock_path)


def _describe(info: dict) -> str:
    return (f"pid {info['pid']} on host {info.get('host', '?')} since {info.get('since', '?')} "
            f"(command: {info.get('command') or '?'})")


def _inheritors(lock_path: Path, skip: set[int]) -> list[str]:
    return [f"pid {p} ({procfs.cmdline(p)})" for p in procfs.pids_with_file_open(lock_path) if p not in skip]


def refusal(lock_path: Path) -> ToolkitError:
    """The error for a lock that another process holds: who, since when, and how to stop it (for
    a rehearsal, with its own commands: pyhelpers/run/hints.py)."""
    err = _refusal(lock_path)
    if _is_rehearsal(Path(lock_path).parent):
        err = ToolkitError(err.what, err.where, for_rehearsal(err.fix))
    return err


def _is_rehearsal(run_dir: Path) -> bool:
    try:
        return bool(json.loads((run_dir / "run.json").read_text(encoding="utf-8")).get("rehearsal"))
    except (OSError, ValueError, AttributeError):
        return False


def _refusal(lock_path: Path) -> ToolkitError:
    info = read_holder(lock_path)
    skip = procfs.ancestors()
    if info and info.get("host") != procfs.hostname():
        return ToolkitError("this run is already in progress on another host",
                            f"{lock_path} is held by {_describe(info)}",
                            f"stop it there with `make stop` on {info.get('host')}, or wait for it to finish")
    if info and holder_alive(info):
        return ToolkitError("this run is already in progress", f"{lock_path} is held by {_describe(info)}",
                            "stop it with `make stop`, or wait for it to finish")
    others = _inheritors(lock_path, skip)
    before = f", which inherited it from the driver {_describe(info)} that is gone" if info else ""
    return ToolkitError(f"the run lock is still held by {', '.join(others) or 'a process we cannot see'}{before}",
                        str(lock_path),
                        "that process was started without closing the lock; stop it (`make stop` stops "
                        "recorded services; else TERM its process group: kill -TERM -- -PGID)")


def take(fd: int, lock_path: Path, holder_pid: int) -> str:
    """Take the lock on the caller's descriptor fd (open on lock_path) for holder_pid.

    Returns a note to show ('' when there is nothing to say): a stale lock of a dead holder, or
    one last held elsewhere, is taken over with a note naming it. Raises ToolkitError naming the
    holder when the lock is held.
    """
    lock_path = Path(lock_path)
    try:
        fst, pst = os.fstat(fd), os.stat(lock_path)
    except OSError as exc:
        raise ToolkitError(f"cannot use the lock descriptor {fd} ({exc.strerror})", str(lock_path),
                           "open it on the lock file first (pyhelpers proc hold-lock does)") from None
    if (fst.st_dev, fst.st_ino) != (pst.st_dev, pst.st_ino):
        raise ToolkitError(f"descriptor {fd} is not open on the lock file", str(lock_path),
                           "pass the descriptor that take_run_lock opened")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise refusal(lock_path) from None
    old = _parse(os.pread(fd, 65536, 0))
    note = _takeover_note(old, lock_path, holder_pid) if old else ""
    data = (json.dumps(_holder(holder_pid), sort_keys=True) + "\n").encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    os.fsync(fd)
    return note


def _takeover_note(old: dict, lock_path: Path, holder_pid: int) -> str:
    if old.get("host") != procfs.hostname():
        return f"taking over the run lock {lock_path}: it was free, last held by {_describe(old)}"
    if not procfs.is_alive(old["pid"], old.get("start_ticks")):
        return f"taking over a stale run lock {lock_path}: its holder {_describe(old)} is gone"
    if old["pid"] != holder_pid:
        return f"taking over the run lock {lock_path}: {_describe(old)} no longer holds it"
    return ""
