"""Time and money limits of the analyst: a stop/deadline clock, the request-rate cap
(ANALYST_MAX_RPM) and the per-round spend cap (ANALYST_MAX_CALLS, persisted in the round dir so a
restart does not reset it)."""

from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path

from pyhelpers.jsonfiles import write_json_atomic


class Stopped(Exception):
    """TERM/INT arrived or the drain deadline passed: abandon the current work, write nothing."""


class CapReached(Exception):
    """ANALYST_MAX_CALLS requests have been sent in this round."""


class Clock:
    """A stop event plus an optional deadline (monotonic seconds). Every wait of the analyst goes
    through `wait`, so TERM and the drain deadline interrupt backoffs and rate-limit pauses."""

    def __init__(self, stop: threading.Event, deadline: float | None = None):
        self.stop, self.deadline = stop, deadline

    def remaining(self) -> float:
        return math.inf if self.deadline is None else self.deadline - time.monotonic()

    def expired(self) -> bool:
        return self.remaining() <= 0

    def stopped(self) -> bool:
        return self.stop.is_set() or self.expired()

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; False when stopped or the deadline came first."""
        seconds = max(0.0, seconds)
        if seconds > self.remaining():
            self.stop.wait(max(0.0, self.remaining()))
            return False
        return not self.stop.wait(seconds) and not self.expired()


class Budget:
    """Counts requests sent (every HTTP attempt, retries included: each one can cost and each one
    counts against the provider's rate limit) and spaces them evenly at 60/ANALYST_MAX_RPM seconds
    (DashScope also enforces RPM/60 per second, so bursts would trip it). The count is written to
    `path` before each request is sent, so a crash never under-counts."""

    def __init__(self, path: Path, max_calls: int, max_rpm: float):
        self.path, self.max_calls = Path(path), max_calls
        self.interval = 60.0 / max_rpm if max_rpm > 0 else 0.0
        self._last: float | None = None
        self._turn = threading.Lock()  # concurrent senders take their slots one at a time, in line
        self.calls = 0
        try:
            self.calls = int(json.loads(self.path.read_text(encoding="utf-8"))["calls"])
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            pass

    @property
    def exhausted(self) -> bool:
        return self.calls >= self.max_calls

    def acquire(self, clock: Clock) -> None:
        """Wait for the next rate slot, then count one request. Raises CapReached or Stopped."""
        with self._turn:
            self._acquire(clock)

    def _acquire(self, clock: Clock) -> None:
        if self.exhausted:
            raise CapReached(f"ANALYST_MAX_CALLS={self.max_calls} requests already sent this round")
        if self._last is not None and self.interval:
            if not clock.wait(self._last + self.interval - time.monotonic()):
                raise Stopped("stopped while waiting for a rate slot")
        elif clock.stopped():
            raise Stopped("stopped before sending")
        self.calls += 1
        write_json_atomic(self.path, {"calls": self.calls, "max_calls": self.max_calls})
        self._last = time.monotonic()
