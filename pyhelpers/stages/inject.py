"""The inject stage of round r: the gate's decisions applied to the compiled bank -> the next
round's bank (the last round: the run's final bank). Its output's existence ends the round."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from pyhelpers.run.layout import RunLayout
from pyhelpers.run.records import write_record
from pyhelpers.skills import bank
from pyhelpers.skills.steps import caps_from, change_summary, inject_step
from pyhelpers.stages import inputs

if TYPE_CHECKING:
    from pyhelpers.stages.context import StageContext

LOG = None  # in-process: the driver's log says why it failed
COLOUR = "#ef6c00"
SHORT = True


def reads(lay: RunLayout, r: int, seed_bank: Path | None) -> list[inputs.RunInput]:
    return [inputs.compiled(lay, r), *inputs.gate_decisions(lay, r)]


def done(lay: RunLayout, r: int, rounds: int) -> tuple[bool, str]:
    out = lay.bank_out(r, rounds)
    if not out.is_file():
        return False, out.name
    if r == rounds - 1:
        # The final bank counts only if written after this round: a run that ended at fewer ROUNDS
        # (then raised, which is allowed) left the final bank of an earlier round.
        try:
            written_for = json.loads(out.read_text(encoding="utf-8")).get("round")
        except ValueError:
            return False, f"{out.name} unreadable"
        if written_for != rounds:
            return False, f"{out.name} is from round {written_for - 1 if isinstance(written_for, int) else '?'}'s end"
    return True, out.name


def run(loop: StageContext, r: int) -> None:
    cfg, lay = loop.cfg, loop.lay
    decisions = lay.gate_decisions(r)
    out = lay.bank_out(r, cfg.ROUNDS)
    old, new = inject_step(lay.compiled(r), decisions_path=decisions if decisions.is_file() else None, round_=r,
                           caps=caps_from(cfg))
    last = r == cfg.ROUNDS - 1
    label = f"final bank (after round {r}, the last)" if last else None  # its `round` names no round of the run
    loop.echo(change_summary(old, new, out=out, sha=bank.write_bank(out, new), label=label))
    write_record(lay, r, "inject", output=out)
    loop.round_done(r)
