"""Processes that no pidfile records, ended one by one through pidfds; and a process's ties to its
parent and its orphans (architecture §5).

`stop_marked()` ends processes that are in no pidfile group but reference a path we created (Ray's
workers run in their own process groups; their marker is the Ray temp dir). `stop_rest_of_my_family()`
ends what a process started, whatever group or session each made itself, found in full only by a
subreaper (`become_subreaper()`). Each process is signalled through a pidfd opened while its start
time still matched, so a reused pid is never hit; nothing is ever signalled by name.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from pathlib import Path

from pyhelpers.procs import procfs
from pyhelpers.procs.groups import KILL_WAIT_S, POLL_S, StopResult

FAMILY_SCANS = 5  # stop_rest_of_my_family: a process forked while the last ones were ended is found by the next


def _prctl(option: int, arg: int) -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, arg) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (PR_SET_PDEATHSIG; Linux).
    The training loop and the lock holder are the driver's children: they must not outlive it."""
    parent = os.getppid()
    if not _prctl(1, signal.SIGKILL):  # 1 = PR_SET_PDEATHSIG
        return
    if os.getppid() != parent:  # the parent died before the call took effect
        os._exit(137)


def become_subreaper() -> bool:
    """Have the kernel hand this process every orphaned descendant (PR_SET_CHILD_SUBREAPER; Linux
    3.4+) instead of PID 1: what a child started stays this process's descendant even when it put
    itself in a new session and its parent died, so `stop_rest_of_my_family` still finds it."""
    return _prctl(36, 1)  # 36 = PR_SET_CHILD_SUBREAPER


def stop_marked(marker: str | Path, grace: float, *, open_files: bool = False,
                dry_run: bool = False) -> list[StopResult]:
    """End every process that references the path `marker` (see procfs.marker_matches), e.g.
    all processes of a Ray session, identified by its temp dir: TERM each, wait up to `grace`,
    KILL the rest, then look again (a dying raylet may still have forked a worker) — twice.

    Each process is signalled through a pidfd opened while its start time still matched, so a
    pid reused between the scan and the signal is never hit. Returns one result per process.
    """
    results: dict[int, StopResult] = {}
    for _ in range(2):
        found = procfs.marker_matches(marker, open_files=open_files)
        targets = {pid: how for pid, how in found.items() if pid not in results}
        if not targets:
            break
        if dry_run:
            return [StopResult(procfs.cmdline(p), p, outcome="would-stop", message=f"pid {p} ({procfs.cmdline(p)}): "
                               f"would stop — {how}") for p, how in sorted(targets.items())]
        results.update(_end_processes(targets, grace))
    return [results[p] for p in sorted(results)]


def stop_rest_of_my_family(grace: float, why: str) -> list[StopResult]:
    """End every other live member of this process's own group and every descendant of this process,
    whatever group or session it made itself (TERM, `grace`, KILL; looked for again until none is
    left, as a dying process may still fork), e.g. all a child started, before a service starts it
    again or ends. A descendant whose parent died is found only in a subreaper (`become_subreaper`).
    Never this process, nor its ancestors (a worker's node keeper shares its agent's group:
    launch/node_keeper.py), nor their other groups."""
    me = os.getpid()
    mine = procfs.ancestors(me)  # (me included)
    results: dict[int, StopResult] = {}
    for _ in range(FAMILY_SCANS):
        targets = {pid: why for pid in {*procfs.group_members(os.getpgid(0)), *procfs.descendants(me)}
                   if pid not in mine and pid not in results}
        if not targets:
            break
        results.update(_end_processes(targets, grace))
    return [r for _, r in sorted(results.items())]


def reap_adopted() -> None:
    """Collect the exit status of this process's dead children: a subreaper adopts orphans, which end
    as its zombies. Call it once every Popen of this process has been waited for (it would take a
    live Popen's status)."""
    me = os.getpid()
    for pid in procfs.all_pids():
        st = procfs.read_stat(pid)
        if st and st.ppid == me and st.state == "Z":
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def stop_pids(targets: dict[int, str], grace: float) -> list[StopResult]:
    """End these processes ({pid: why}), each through a pidfd (TERM, `grace`, KILL): processes that
    no pidfile group holds, e.g. those inside a network namespace of ours."""
    return [r for _, r in sorted(_end_processes(targets, grace).items())]


def _end_processes(targets: dict[int, str], grace: float) -> dict[int, StopResult]:
    handles = {}
    for pid in targets:
        st = procfs.read_stat(pid)
        if not st or st.state == "Z":
            continue
        cmd = procfs.cmdline(pid)
        try:
            fd = os.pidfd_open(pid)
        except (ProcessLookupError, OSError):
            continue
        if procfs.start_ticks(pid) != st.start_ticks:  # pid reused before we held it
            os.close(fd)
            continue
        handles[pid] = (fd, st.start_ticks, cmd)
    out: dict[int, StopResult] = {}
    try:
        for sig, wait_s, outcome in ((signal.SIGTERM, grace, "stopped"), (signal.SIGKILL, KILL_WAIT_S, "killed")):
            live = [p for p in handles if p not in out]
            for pid in live:
                try:
                    signal.pidfd_send_signal(handles[pid][0], sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + wait_s
            while True:
                for pid in live:
                    if pid not in out and not procfs.is_alive(pid, handles[pid][1]):
                        how = "after TERM" if outcome == "stopped" else f"after {grace:g} s"
                        out[pid] = StopResult(handles[pid][2], pid, outcome=outcome,
                                              message=f"pid {pid} ({handles[pid][2]}): {outcome} {how} — {targets[pid]}")
                if all(p in out for p in live) or time.monotonic() >= deadline:
                    break
                time.sleep(POLL_S)
        for pid in handles:
            if pid not in out:
                out[pid] = StopResult(handles[pid][2], pid, outcome="stuck", message=f"pid {pid} ({handles[pid][2]}): "
                                      "still alive after KILL (state D: waiting in the kernel)")
    finally:
        for fd, _, _ in handles.values():
            os.close(fd)
    return out
