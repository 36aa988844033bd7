"""The run's own files that the next stages will read, checked before any process starts.

A truncated round bank found only by the rollout plugin inside the slime job costs ShopSimulator's
start, Ray's, the job's and the model load, and its error then names no file. So the preflight
(`make doctor`, bin/train) validates, from where the run stands (runstate.position), every file the
rest of the current round reads, against its schema in pyhelpers/schemas/:

    train .. compile   the round's bank (round 0 of a new run: SEED_BANK, when set), and the
                       analyst's spool/ and candidates/ files already written (compile reads them)
    evaluate, inject   compiled.json; inject also the gate's decisions.json

Later rounds' files do not exist yet: the loop writes them, validated, as it goes. The task files
are the doctor's `data` check.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyhelpers import jsonfiles
from pyhelpers.config.load import Config
from pyhelpers.errors import ToolkitError
from pyhelpers.run.layout import RunLayout
from pyhelpers.skills import bank as bank_mod
from pyhelpers.stages import NAMES as STAGES
from pyhelpers.stages import position as runstate


@dataclass(frozen=True)
class RunInput:
    path: Path
    schema: str  # a schema of pyhelpers/schemas/ (bank: also the rules of skills.bank.check_bank)
    fix: str


def _seed(seed_bank: Path | None) -> list[RunInput]:
    """SEED_BANK, read once: by round 0's train of a new run."""
    return [RunInput(seed_bank, "bank", "point SEED_BANK at a bank written by `pyhelpers skillbank` "
                                        "(pyhelpers/schemas/bank.schema.json), or leave it empty")] if seed_bank else []


def _round_files(lay: RunLayout, r: int, stage: str, seed_bank: Path | None) -> list[RunInput]:
    step = STAGES.index(stage)
    out: list[RunInput] = []
    if step <= STAGES.index("compile"):
        bank = lay.bank_in(r)
        if r == 0 and stage == "train" and not bank.is_file():
            out += _seed(seed_bank)
        else:
            redo = (f"move it aside: `make resume` then redoes round {r - 1}'s inject from its compiled.json and "
                    "gate decisions" if r else "move it aside: `make resume` then writes it again from SEED_BANK")
            out.append(RunInput(bank, "bank", redo))
        for d, schema in ((lay.spool(r), "spool"), (lay.candidates(r), "candidates")):
            out += [RunInput(p, schema, "the analyst wrote it: move it out of the run directory (compile then goes "
                                        "without it), or restore it from a copy of the run")
                    for p in sorted(d.glob("*.json"))]
    else:
        out.append(RunInput(lay.compiled(r), "bank", "move it aside: `make resume` then compiles the round again"))
        decisions = lay.gate_decisions(r)
        if stage == "inject" and decisions.is_file():
            out.append(RunInput(decisions, "gate_decisions",
                                f"move {lay.gate_dir(r)} aside: `make resume` then plays the round's gate again"))
    return out


def upcoming(lay: RunLayout, pos: runstate.Position, seed_bank: Path | None) -> list[RunInput]:
    """The files the stages from `pos` to the end of its round will read (see the module doc)."""
    if pos.finished:
        return []
    if pos.stage == "baseline":  # the base model's val reads only task files; round 0's train follows
        return _round_files(lay, 0, stage="train", seed_bank=seed_bank)
    return _round_files(lay, pos.round, stage=pos.stage, seed_bank=seed_bank)


def problem(inp: RunInput) -> str | None:
    """What is wrong with one file (its path, the JSON path of the field and the rule), or None."""
    try:
        if inp.schema == "bank":
            bank_mod.load_bank(inp.path)
        else:
            jsonfiles.load_validated(inp.path, inp.schema)
    except ToolkitError as exc:
        return f"{exc.what}: {exc.where}"
    return None


def check(cfg: Config, lay: RunLayout, fresh: bool = False) -> tuple[list[RunInput], list[tuple[RunInput, str]]]:
    """(files checked, [(file, problem)]) from where the run stands; `fresh`: as a new run (a fresh
    rehearsal replaces the previous one's files, which nothing will read)."""
    seed = cfg.SEED_BANK
    inputs = _seed(seed) if fresh else \
        upcoming(lay, runstate.position(lay, cfg.ROUNDS, cfg.BASELINE_VAL), seed)
    bad = [(i, p) for i in inputs if (p := problem(i))]
    return inputs, bad
