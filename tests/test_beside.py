"""Cut 4 of issue 29 in the loop: compile runs beside evaluate (stages/__init__.py BESIDE,
VAL_BESIDE_COMPILE): bare val plays while compile waits for the analyst's drain, the gate waits
for compile, and a failure of either is handled under its own stage's name."""

from __future__ import annotations

import threading
from dataclasses import replace
from types import SimpleNamespace

import pytest

from pyhelpers import stages
from pyhelpers.loop import loop
from pyhelpers.run import events


def _loop(tmp_path, beside: bool) -> loop.Loop:
    lp = loop.Loop.__new__(loop.Loop)
    cfg = SimpleNamespace(VAL_BESIDE_COMPILE=beside)  # the one knob the loop reads here
    lp.cfg, lp.lay, lp.echo, lp.beside = cfg, SimpleNamespace(run_dir=tmp_path), lambda s: None, {}
    return lp


@pytest.fixture
def fake_stages(monkeypatch):
    """compile waits (a drain) until val has played; evaluate plays val, then waits for compile."""
    order: list[str] = []
    drained = threading.Event()
    fail = {}

    def compile_run(lp, r):
        order.append("compile-start")
        drained.wait(5)
        if "compile" in fail:
            raise fail["compile"]
        order.append("compiled")

    def evaluate_run(lp, r):
        order.append("val")
        drained.set()
        if "evaluate" in fail:
            raise fail["evaluate"]
        lp.wait_beside(r, "compile")
        order.append("gate")

    for name, fn in (("compile", compile_run), ("evaluate", evaluate_run)):
        monkeypatch.setitem(stages._BY_NAME, name, replace(stages.get(name), run=fn))
    return order, drained, fail


def test_val_plays_while_compile_waits_and_the_gate_follows_compile(tmp_path, fake_stages):
    order, _, _ = fake_stages
    assert stages.get("compile").beside == "evaluate"
    _loop(tmp_path, beside=True)._run_position(0, "compile")
    assert order.index("val") < order.index("compiled") < order.index("gate")
    ends = [e["stage"] for e in events.read(tmp_path) if e["kind"] == "stage-end" and e["status"] == 0]
    assert sorted(ends) == ["compile", "evaluate"]


def test_without_the_knob_compile_comes_first(tmp_path, fake_stages):
    order, drained, _ = fake_stages
    drained.set()  # nothing else would release the drain
    lp = _loop(tmp_path, beside=False)
    lp._run_position(0, "compile")
    assert order == ["compile-start", "compiled"]  # evaluate is the next position, run by the loop later


@pytest.mark.parametrize("failing", ["compile", "evaluate"])
def test_a_failure_beside_is_reported_under_its_own_stage(tmp_path, fake_stages, failing):
    _, _, fail = fake_stages
    fail[failing] = RuntimeError(f"{failing} broke")
    lp = _loop(tmp_path, beside=True)
    with pytest.raises(loop.BesideFailed) as got:
        lp._run_position(0, "compile")
    assert got.value.stage == failing and str(got.value.error) == f"{failing} broke"
    assert lp.beside == {}  # nothing left running beside when the loop restarts
