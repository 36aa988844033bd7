"""A stand-in's delay (tests/fakes/README.md "Delays"), waited and, for a bench, recorded.

    from modelled_wait import wait, wait_knob
    wait_knob("FAKE_SLIME_STEP_DELAY")               # sleeps $FAKE_SLIME_STEP_DELAY seconds
    wait("FAKE_SGLANG_LATENCY_MS", 0.8)              # a delay the stand-in computed itself
    wait("FAKE_ANALYST_DELAY_S", 1.0, stop.wait)     # its own way of sleeping (a stop event's wait)

With FAKE_WAIT_LOG=<file> (bench/round_gpu_idle.py sets it), every wait appends one JSON line
{"knob", "start", "end", "waited_s", "modelled_s"}: when it ran (time.time(), the clock of the
run's events.jsonl), the seconds asked for, and the real seconds they stand for -- waited_s /
FAKE_WAIT_SCALE (rehearsal seconds per real second; 1 when unset). A `sleep` that returns True was
cut short (the requester hung up, the stand-in stops): then only the part waited is modelled. The bench then reads the run's
timeline in modelled seconds: a wait counts what it models, whatever this CPU did meanwhile.
One os.write per line on an O_APPEND file: lines of concurrent waits (the engines' /generate
threads, several stand-ins) never interleave.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

LOG, SCALE = "FAKE_WAIT_LOG", "FAKE_WAIT_SCALE"


def scale() -> float:
    raw = os.environ.get(SCALE, "") or "1"
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise SystemExit(f"{SCALE}={raw!r}: not a positive number (rehearsal seconds per real second, "
                         f"e.g. {1 / 60:.6f}; bench/round_gpu_idle.py sets it)")
    return value


def wait(knob: str, seconds: float, sleep: Callable[[float], object] = time.sleep) -> None:
    """Sleep `seconds` (the value of the delay `knob`) with `sleep` (True back: cut short); record
    it when FAKE_WAIT_LOG is set."""
    if seconds <= 0:
        return
    path = os.environ.get(LOG)
    per = scale() if path else 1.0  # a bad scale fails before the wait, not after it
    start = time.time()
    cut = sleep(seconds) is True
    end = time.time()
    if not path:
        return
    line = json.dumps({"knob": knob, "start": start, "end": end, "waited_s": seconds,
                       "modelled_s": (end - start if cut else seconds) / per}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def wait_knob(knob: str) -> None:
    """Wait $knob seconds (unset or empty: none)."""
    wait(knob, float(os.environ.get(knob, "0") or 0))
