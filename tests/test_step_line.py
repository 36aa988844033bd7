"""The train stage's updating line on a terminal keeps its ETA in 80 columns (issue 40, item 5).

It read "round 0 (1 of 2) train: step 2/2 running 0:02 (a step takes ~0:03); ETA round …": the
console cuts the line at the terminal's width, and in 80 columns the cut fell before the ETA.
"""

from __future__ import annotations

import json
import os
import pty
import re
import time
from types import SimpleNamespace

import pytest

from pyhelpers.loop.console import Console
from pyhelpers.run.layout import RunLayout
from pyhelpers.stages import stepwatch
from pyhelpers.stages.progress import Eta, duration


def _updating_line(tmp_path, rounds: int, r: int, steps: int, done: int, running_s: float, eta: Eta) -> str:
    """What the step watcher draws while step done+1 of round r runs, `running_s` in."""
    lay = RunLayout(tmp_path / "run", tmp_path / "save", steps_per_round=steps)
    metrics = lay.rollout_metrics(r)
    metrics.parent.mkdir(parents=True)
    metrics.write_text("".join(json.dumps({"rollout_id": r * steps + k, "metrics": {}}) + "\n" for k in range(done)))
    marker = lay.started_marker(r)
    marker.touch()
    os.utime(marker, (time.time() - running_s,) * 2)  # the step in progress began then
    drawn, polls = [], iter((False, True))
    stepwatch.watch(SimpleNamespace(ROUNDS=rounds), lay, r, stopped=lambda _s: next(polls), say=lambda _s: None,
                    eta_at=lambda _evs, _k: eta, status=drawn.append)
    assert drawn[-1] == "" and len(drawn) == 2, drawn  # the line, then erased at the job's end
    return drawn[0]


def _on_terminal(line: str, columns: int, monkeypatch) -> str:
    """The line as the driver's console shows it on a terminal that many columns wide."""
    monkeypatch.setenv("COLUMNS", str(columns))
    main, child = pty.openpty()
    try:
        Console(child, None).status(line)
        return os.read(main, 4096).decode().replace("\r\033[K", "")
    finally:
        os.close(child)
        os.close(main)


@pytest.mark.parametrize("rounds, r, steps, done, running_s, eta, words", [
    # a rehearsal's round 0: evaluate not timed yet
    (2, 0, 2, 1, 2, Eta(20, 100, 3, untimed=["export", "evaluate"]), "ETA round 0:20, run 1:40"),
    # a long real run: hours left, ten rounds, twenty steps of minutes each
    (10, 8, 20, 19, 312, Eta(5025, 36000, 375), "ETA round 1:23:45, run 10:00:00"),
])
def test_the_eta_fits_in_80_columns(tmp_path, monkeypatch, rounds, r, steps, done, running_s, eta, words):
    line = _updating_line(tmp_path, rounds, r, steps, done, running_s, eta)
    shown = _on_terminal(line, 80, monkeypatch)
    assert words in shown, f"cut in 80 columns before the ETA: {shown!r}"
    assert f"round {r} ({r + 1} of {rounds}) train: step {done + 1}/{steps}" in shown, shown
    # The step's own time stays on the line, after the ETA, for a terminal wide enough.
    assert re.search(rf"; this step \d+:\d\d of ~{re.escape(duration(eta.step_s))}$", line), line
