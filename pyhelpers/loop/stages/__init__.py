"""The stages of a run, one file each, and their registry -- the one list of stages that the loop,
resume (run/state.position), `make plan`, `make status`, `make logs` and the report read.

Every stage module exports
    run(loop, r)           do round r's stage; `loop` (pyhelpers/loop/loop.py) holds what lives for
                           the run: cfg, layout, echo, notifier, the analyst drains, the prompt builders
    done(lay, r, rounds)   (done?, why) from the run's artifacts alone, never from a status file
    LOG                    the log (in the run's logs/) whose tail says why it failed, or None
and may export
    BESIDE                 the name of the next stage, which starts while this one still runs (in a
                           thread of the loop) and waits for it where it needs its artifact
                           (Loop.wait_beside); the loop does so only with VAL_BESIDE_COMPILE=1
A round runs ROUND in order: train -> rotate -> export -> compile -> evaluate -> inject, with
compile beside evaluate: bare val plays while compile waits for the analyst's drain, the gate
after it. The first stage whose done() is false is where a run (re)starts. `baseline` runs once
before round 0 when BASELINE_VAL=1. To add a stage: a file here with the three names, and a line in ROUND.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyhelpers.loop.stages import baseline, compile, evaluate, export, inject, rotate, train


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[..., None]  # (loop, r)
    done: Callable[..., tuple[bool, str]]  # (lay, r, rounds)
    log: str | None  # file name in the run's logs/, read when the stage fails
    beside: str | None = None  # the next stage, started while this one runs (module doc)


def _stage(module) -> Stage:
    return Stage(module.__name__.rsplit(".", 1)[1], module.run, done=module.done, log=module.LOG,
                 beside=getattr(module, "BESIDE", None))


ROUND: tuple[Stage, ...] = tuple(_stage(m) for m in (train, rotate, export, compile, evaluate, inject))
BASELINE = _stage(baseline)
NAMES: tuple[str, ...] = tuple(s.name for s in ROUND)  # a round's stages, in order
ALL_NAMES: tuple[str, ...] = (BASELINE.name, *NAMES)  # every stage, in the order a run meets them
_BY_NAME = {s.name: s for s in (BASELINE, *ROUND)}
for _s, _next in zip(ROUND, (*ROUND[1:], None), strict=True):  # a stage runs beside the one after it only
    assert _s.beside in (None, _next and _next.name), f"{_s.name}.BESIDE must name the next stage"


def get(name: str) -> Stage:
    return _BY_NAME[name]
