"""The stages of a run, one file each, and their registry: the one source of stage facts. The
loop, resume (stages/position), the preflight (stages/preflight), ETAs (stages/progress), `make
plan`, `make status`, `make logs` and the report read them here and name no stage themselves.

Every stage module exports
    run(loop, r)           do round r's stage; `loop` is a stages.context.StageContext (the driver's
                           Loop): cfg, layout, echo, notifier, ... -- what it declares, nothing else
    done(lay, r, rounds)   (done?, why) from the run's artifacts alone, never from a status file
    LOG                    the log (in the run's logs/) whose tail says why it failed, or None
    COLOUR                 its bar in the report's timeline
and may export (defaults in brackets)
    LABEL                  its name in the report's legend and `make plan`'s stage list [its name]
    SUMMARY                what it does, in a few words, for `make plan` [""]
    SHORT                  too short for an untimed ETA to deserve a word [False]
    STEPPED                it runs STEPS_PER_ROUND training steps: ETAs and status count them [False]
    WRITES                 (cfg, lay) -> [(what, bytes)] the disk guard checks before it starts [None]
    reads(lay, r, seed)    the run's files that must be valid when a run (re)starts here [none]
    launches(cfg, lay, r, model_args)
                           (name, command line, note) of what it starts, for `make plan` [none]
    BESIDE                 the name of the next stage, which starts while this one still runs (in a
                           thread of the loop) and waits for it where it needs its artifact
                           (Loop.wait_beside); the loop does so only with VAL_BESIDE_COMPILE=1 [None]
    GPU_PHASE              the idle phase of run/gpu_time its whole run is billed to, or gpu_time.JOB /
                           gpu_time.SERVER for the stage whose events carry the job's / eval server's
                           phases; GPU_ROLES gathers them [None: `other`]
A round runs ROUND in order; its last stage ends the round (its artifact is the next round's bank).
With VAL_BESIDE_COMPILE=1 compile runs beside evaluate: bare val plays while compile waits for the
analyst's drain, the gate after it.
The first stage whose done() is false is where a run (re)starts. BASELINE runs once before round 0
when BASELINE_VAL=1. To add a stage: a file here, and its name's line in ROUND.

A stage imports no other stage, and nothing but this registry imports a stage: what two stages
share lives in a module below them (launch/slime_job: the job's stop; analyst/drain: the
analyst's drain; evaluate/builders: the eval prompt builder) or beside them here without being a
stage (eval_session: the eval server's session of evaluate and baseline; one_job: the one-job
mode's job as train and evaluate share it; inputs, stepwatch).
The registry loads its stages by name (ROUND's lines); tests/test_stage_registry.py checks that
none imports its way back to it, an edge tests/test_architecture.py's import graph cannot see.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from pyhelpers.run import gpu_time


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[..., None]                  # (loop, r)
    done: Callable[..., tuple[bool, str]]     # (lay, r, rounds)
    log: str | None                           # file name in the run's logs/, read when the stage fails
    colour: str
    label: str
    summary: str
    short: bool
    stepped: bool
    writes: Callable[..., list] | None        # (cfg, lay) -> [(what, bytes)]
    reads: Callable[..., list]                # (lay, r, seed_bank) -> [RunInput]
    launches: Callable[..., list]             # (cfg, lay, r, model_args) -> [(name, line, note)]
    beside: str | None = None                 # the next stage, started while this one runs (module doc)
    gpu_phase: str | None = None              # where its time goes in run/gpu_time's split


def _none(*_args, **_kw) -> list:
    return []


def _stage(name: str) -> Stage:
    module = importlib.import_module(f"{__name__}.{name}")
    return Stage(name, module.run, done=module.done, log=module.LOG, colour=module.COLOUR,
                 label=getattr(module, "LABEL", name), summary=getattr(module, "SUMMARY", ""),
                 short=getattr(module, "SHORT", False), stepped=getattr(module, "STEPPED", False),
                 writes=getattr(module, "WRITES", None), reads=getattr(module, "reads", _none),
                 launches=getattr(module, "launches", _none), beside=getattr(module, "BESIDE", None),
                 gpu_phase=getattr(module, "GPU_PHASE", None))


ROUND: tuple[Stage, ...] = tuple(map(_stage, (  # a round's stages, in the order they run: one line each
    "train",
    "rotate",
    "export",
    "compile",
    "evaluate",
    "inject",
)))
BASELINE = _stage("baseline")
END = ROUND[-1]  # its artifact ends a round: the next round's bank (the last round: the final bank)
ALL: tuple[Stage, ...] = (BASELINE, *ROUND)  # every stage, in the order a run meets them
NAMES: tuple[str, ...] = tuple(s.name for s in ROUND)  # a round's stages, in order
ALL_NAMES: tuple[str, ...] = tuple(s.name for s in ALL)
_BY_NAME = {s.name: s for s in ALL}
for _s, _next in zip(ROUND, (*ROUND[1:], None), strict=True):  # a stage runs beside the one after it only
    assert _s.beside in (None, _next and _next.name), f"{_s.name}.BESIDE must name the next stage"
_ROLE = {p: [s.name for s in ROUND if s.gpu_phase == p] for p in (gpu_time.JOB, gpu_time.SERVER)}
assert all(len(v) == 1 for v in _ROLE.values()), f"one stage each must run the job and the eval server: {_ROLE}"
# run/gpu_time's split of a round's wall time needs these stage facts (it names no stage itself)
GPU_ROLES = gpu_time.Roles(
    whole={s.name: s.gpu_phase for s in ROUND if s.gpu_phase not in (None, gpu_time.JOB, gpu_time.SERVER)},
    job=_ROLE[gpu_time.JOB][0], server=_ROLE[gpu_time.SERVER][0], end=END.name, outside=BASELINE.name)


def get(name: str) -> Stage:
    return _BY_NAME[name]
