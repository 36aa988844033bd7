"""Stopping a run: the driver, then everything it started, by process group (architecture §5).

`stop_run()` is `make stop` from another shell. A stop holds until the user runs `make train` or
`make resume` (the self-healing loop never restarts after it): it writes runs/<RUN>/stopped first, which the driver (and its self-healing restarts) read before starting anything, then:

1. TERMs the driver (the pid in the lock file, checked by its start time) and waits for the lock
   to come free: the driver's own exit path stops its stage and services in reverse order;
2. KILLs the driver if it has not let go after the wait;
3. stops what is left either way (the driver may have been SIGKILLed before): `cleanup()`.

A stop lasts until the user continues the run: `clear_stop()` is what `make train` / `make resume`
do first (bin/train, holding the run lock). It removes the marker of a stop that came before that
command started; a stop that lands while it starts keeps its marker, and the loop refuses.

`cleanup()` (also what the driver runs at exit, and `make resume` runs first for orphans): stop
the recorded slime job through Ray (and remove its W&B netrc), every pidfile group in reverse start order (TERM, grace,
KILL), then every process still referencing the run's Ray temp dir (Ray's workers live in their
own process groups), also by TERM then KILL. Nothing is ever signalled by name.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from pyhelpers.errors import ToolkitError
from pyhelpers.procs import family, groups, procfs
from pyhelpers.run import events, lock
from pyhelpers.run.layout import RunLayout, job_netrc


def cleanup(lay: RunLayout, *, ray_temp_dir: str, grace: float, stop_job) -> list[str]:
    """Stop the job (stop_job(): a line to print), every recorded service (reverse order) and
    Ray's stragglers. Lines to print. When it stopped a process, its time is an event (`cleanup`):
    the ETA counts the run's own cleanup at its end from it (stages/progress.py END_OF_RUN)."""
    t0 = time.monotonic()
    lines = [stop_job()]
    job_netrc(lay.run_dir).unlink(missing_ok=True)  # the job's W&B key goes with the job (a killed driver's too)
    results = groups.stop_all(lay.pids, grace)
    if Path(ray_temp_dir).exists():
        results += family.stop_marked(ray_temp_dir, grace)
    if any(r.outcome in ("stopped", "killed", "stuck") for r in results):
        events.append(lay.run_dir, "cleanup", seconds=round(time.monotonic() - t0, 3))
    return [ln for ln in lines + [r.message for r in results] if ln]


def clear_stop(lay: RunLayout, started_at: float) -> str | None:
    """Continue a stopped run: remove runs/<RUN>/stopped when it was written before `started_at`
    (epoch seconds: when this make train / make resume started). Returns what the marker said, or
    None when the run was not stopped. A newer marker means `make stop` was called after this
    command started: refused, the marker stays."""
    marker = lay.stopped_marker
    try:
        text, written = marker.read_text().strip(), marker.stat().st_mtime
    except FileNotFoundError:
        return None
    if written > started_at:
        raise ToolkitError("`make stop` was called while this run was starting", str(marker),
                           "continue it with `make resume`")
    marker.unlink()
    return text


def running_beside(lay: RunLayout) -> list[str]:
    """Other runs of RUNS_DIR whose driver runs now, each with the command that stops it: a
    `make stop` that found nothing of its own says what the user may have meant."""
    out = []
    for lock_file in sorted(lay.run_dir.parent.glob("*/lock")):
        if lock_file.parent == lay.run_dir or not lock.live_holder(lock_file):
            continue
        try:
            rehearsal = json.loads((lock_file.parent / "run.json").read_text(encoding="utf-8")).get("rehearsal")
        except (OSError, ValueError):
            rehearsal = None
        how = ("a rehearsal: stop it with `make stop REHEARSAL=1`" if rehearsal else
               f"stop it with `make stop RUN_NAME={lock_file.parent.name}`")
        out.append(f"{lock_file.parent.name} is running ({how})")
    return out


# The driver's own stop (make stop's first step) has parts the grace does not scale: its thread
# joins (5 s each), up to three calls to Ray's job API (3 s each), two Python starts in bin/train's
# exit (`run cleanup`, the analyst model's stop): about 10 s on a quiet machine. On 2 cores shared
# by a whole `make test` and the slime lane, a rehearsal's orderly stop outlasted 6 x STOP_GRACE
# + 30 with the tests' STOP_GRACE=2 (42 s) and its bin/train was SIGKILLed: no hint printed, and
# `make` reported an error for a requested stop. So the wait is never shorter than
# DRIVER_STOP_FLOOR_S; with the default STOP_GRACE (20) it is 150 s as before.
DRIVER_STOP_FLOOR_S = 120.0


def driver_stop_wait(grace: float) -> float:
    """How long `make stop` waits for the driver to let go of the lock before it SIGKILLs it: the
    driver stops a stage and then each service with the grace, so several graces, and never less
    than DRIVER_STOP_FLOOR_S."""
    return max(6 * grace + 30, DRIVER_STOP_FLOOR_S)


def stop_run(lay: RunLayout, *, ray_temp_dir: str, grace: float, stop_job, progress=lambda s: None,
             mark: bool = True) -> list[str]:
    """`make stop`; mark=False (a finished run): stop what is left, record no stop to continue."""
    if mark:
        lay.stopped_marker.parent.mkdir(parents=True, exist_ok=True)
        lay.stopped_marker.write_text(f"stopped by `make stop` at {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    lines = []
    holder = lock.read_holder(lay.lock)
    if lock.live_holder(lay.lock):
        pid = holder["pid"]
        progress(f"stopping the driver (pid {pid}); it stops its stage and services in reverse order")
        os.kill(pid, signal.SIGTERM)
        wait = driver_stop_wait(grace)
        deadline = time.monotonic() + wait
        while not lock.lock_free(lay.lock) and time.monotonic() < deadline:
            time.sleep(0.2)
        if lock.lock_free(lay.lock):
            lines.append(f"driver pid {pid}: stopped")
        elif procfs.is_alive(pid, holder.get("start_ticks")):
            os.kill(pid, signal.SIGKILL)
            lines.append(f"driver pid {pid}: killed (did not finish stopping within {wait:g} s)")
    elif holder and holder.get("host") != procfs.hostname():
        lines.append(f"the driver runs on host {holder.get('host')}: run `make stop` there")
    lines += cleanup(lay, ray_temp_dir=ray_temp_dir, grace=grace, stop_job=stop_job)
    return lines
