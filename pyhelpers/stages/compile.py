"""The compile stage of round r: once the analyst's drain has finished (analyst/drain.py), the
round's candidates are merged into its bank (skills.steps.compile_step) -> compiled.json. It runs
beside evaluate (BESIDE; stages/__init__.py): only the gate needs compiled.json."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pyhelpers.analyst import drain
from pyhelpers.run.layout import RunLayout
from pyhelpers.run.records import write_record
from pyhelpers.skills import bank
from pyhelpers.skills.steps import change_summary, compile_step
from pyhelpers.stages import inputs

if TYPE_CHECKING:
    from pyhelpers.stages.context import StageContext

LOG = None  # in-process: the driver's log says why it failed
COLOUR = "#f9a825"
SHORT = True
GPU_PHASE = "compile-wait"  # run/gpu_time.py: the GPUs wait for the bank while it runs
# Compile waits for the analyst's drain (network, minutes) and then takes a second: with
# VAL_BESIDE_COMPILE=1 the eval server starts and bare val plays meanwhile (the GPUs would sit
# idle); evaluate's gate waits for compiled.json (Loop.wait_beside).
BESIDE = "evaluate"


def reads(lay: RunLayout, r: int, seed_bank: Path | None) -> list[inputs.RunInput]:
    return inputs.bank_and_analyst(lay, r, seed_bank)


def done(lay: RunLayout, r: int, rounds: int) -> tuple[bool, str]:
    return lay.compiled(r).is_file(), "compiled.json"


def run(loop: StageContext, r: int) -> None:
    cfg, lay = loop.cfg, loop.lay
    drain.wait(cfg, lay, r, loop.echo)
    hf = cfg.HF_MODEL
    for d in (lay.spool(r), lay.candidates(r)):
        d.mkdir(parents=True, exist_ok=True)
    old, new, _ = compile_step(bank_path=lay.bank_in(r), cand_dir=lay.candidates(r), round_=r,
                               hf_dir=hf if hf.is_dir() else None, spool_dir=lay.spool(r),
                               dup_jaccard=cfg.SKILL_DUP_JACCARD, max_skill_tokens=cfg.SKILL_MAX_TOKENS)
    out = lay.compiled(r)
    loop.echo(change_summary(old, new, out=out, sha=bank.write_bank(out, new)))
    write_record(lay, r, "compile", output=out)
