"""`make stop`'s wait for the driver's orderly stop (pyhelpers/run/stop.py): how long before it
SIGKILLs the lock holder, on a clock the test drives (no waiting for time)."""

from __future__ import annotations

import signal

from pyhelpers.run import stop
from pyhelpers.run.layout import RunLayout


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def _stop_a_driver_that_never_lets_go(tmp_path, monkeypatch, grace: float) -> tuple[float, list[str]]:
    """stop_run against a lock holder that never frees the lock: (when it was SIGKILLed, on the
    stop's clock from the TERM, and what the stop said)."""
    lay = RunLayout(tmp_path / "runs" / "r", tmp_path / "save" / "r", steps_per_round=2)
    clock, signals = _Clock(), []
    monkeypatch.setattr(stop.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(stop.time, "sleep", clock.sleep)
    monkeypatch.setattr(stop.lock, "read_holder", lambda _p: {"pid": 4242, "start_ticks": 7, "host": "h"})
    monkeypatch.setattr(stop.lock, "live_holder", lambda _p: True)
    monkeypatch.setattr(stop.lock, "lock_free", lambda _p: False)
    monkeypatch.setattr(stop.procfs, "is_alive", lambda pid, ticks: (pid, ticks) == (4242, 7))
    monkeypatch.setattr(stop.os, "kill", lambda pid, sig: signals.append((pid, sig, clock.now)))
    monkeypatch.setattr(stop, "cleanup", lambda *a, **kw: [])
    lines = stop.stop_run(lay, ray_temp_dir=str(tmp_path / "ray"), grace=grace, stop_job=lambda: "")
    (term_pid, term, t0), (kill_pid, kill, t1) = signals
    assert (term_pid, term, kill_pid, kill) == (4242, signal.SIGTERM, 4242, signal.SIGKILL)
    return t1 - t0, lines


def test_a_small_stop_grace_still_gives_the_driver_time_to_stop_in_order(tmp_path, monkeypatch):
    """With STOP_GRACE=2 (the tests' value; a user may set it too) `make stop` SIGKILLed a rehearsal's
    bin/train after 42 s, while its orderly stop -- thread joins, Ray job API calls, two Python
    starts -- was still under way on a loaded machine: no hint printed, make reporting an error.
    The wait now has a floor; the default grace's wait is unchanged."""
    waited, lines = _stop_a_driver_that_never_lets_go(tmp_path, monkeypatch, grace=2)
    assert waited >= 120, f"SIGKILLed {waited:.0f} s after the TERM"
    assert "driver pid 4242: killed (did not finish stopping within 120 s)" in lines
    waited, _ = _stop_a_driver_that_never_lets_go(tmp_path, monkeypatch, grace=20)
    assert 150 <= waited < 151  # 6 x STOP_GRACE + 30, as before
