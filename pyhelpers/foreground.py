"""Run one stage of the driver as a recorded process group, in the foreground (design.md §5).

A stage (train, export, evaluate) starts services and long commands of its own. Run as a plain
child of the bash driver, a SIGKILLed driver would leave it running unrecorded, and a resumed run
would start a second copy beside it. So the stage is a service like the others: its own session,
a pidfile in pids/ (`make resume` and `make stop` stop it), its output appended to logs/NAME.log.
`run()` starts it, streams that log to our stderr while it runs (the user still watches the
stage in the terminal), and returns its exit status. TERM/INT/HUP to us stop the stage's group
(TERM, grace, KILL) before we exit with 128+signal.

We die with the driver (PR_SET_PDEATHSIG): the stage then lives on as a recorded orphan, exactly
like the services, and the next `make resume`/`make stop` stops it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from pathlib import Path
from typing import BinaryIO

from . import procfs, procs

PR_SET_PDEATHSIG = 1
POLL_S = 0.05


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL us when the parent (the driver shell) dies. Linux only."""
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the call took effect
        os._exit(137)


def _copy_new(log: BinaryIO, out: BinaryIO) -> None:
    data = log.read()
    if data:
        out.write(data)
        out.flush()


def run(name: str, argv: list[str], pids_dir: Path, logs_dir: Path, grace: float, out: BinaryIO) -> int:
    """Start `argv` as service `name`, stream its log to `out`, return its exit status."""
    caught: list[int] = []

    def on_signal(signum, _frame):
        caught.append(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    log_path = Path(logs_dir) / f"{name}.log"
    offset = log_path.stat().st_size if log_path.exists() else 0
    rec, child = procs.spawn(name, argv, pids_dir, logs_dir)
    with open(log_path, "rb") as log:
        log.seek(offset)
        log.readline()  # the "==> start" header: the log keeps it, the terminal does not need it
        while child.poll() is None:
            if caught:
                procs.stop(rec, grace, pids_dir=pids_dir)
                child.wait()
                _copy_new(log, out)
                return 128 + caught[0]
            _copy_new(log, out)
            time.sleep(POLL_S)
        _copy_new(log, out)
    if not procfs.group_members(rec.pgid):  # else a straggler of the stage's group: keep it recorded
        procs.pidfile(pids_dir, name).unlink(missing_ok=True)
    status = child.returncode
    return 128 - status if status < 0 else status
