"""The run's own files that the next stages will read, checked before any process starts.

A truncated round bank found only by the rollout plugin inside the slime job costs ShopSimulator's
start, Ray's, the job's and the model load, and its error then names no file. So the preflight
(stages/preflight.py: `make doctor`, bin/train) validates, from where the run stands, every file
the rest of the current round reads, against its schema in pyhelpers/schemas/. Each stage declares
its own (`reads()` in its file, built from the pieces here); this module knows no stage.

Later rounds' files do not exist yet: the loop writes them, validated, as it goes. The task files
are the doctor's `data` check.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyhelpers import jsonfiles
from pyhelpers.errors import ToolkitError
from pyhelpers.run.layout import RunLayout
from pyhelpers.skills.bank import load_bank


@dataclass(frozen=True)
class RunInput:
    path: Path
    schema: str  # a schema of pyhelpers/schemas/ (bank: also the rules of skills.bank.check_bank)
    fix: str


def seed(seed_bank: Path | None) -> list[RunInput]:
    """SEED_BANK, read once: by round 0's train of a new run."""
    return [RunInput(seed_bank, "bank", "point SEED_BANK at a bank written by `pyhelpers skillbank` "
                                        "(pyhelpers/schemas/bank.schema.json), or leave it empty")] if seed_bank else []


def bank_and_analyst(lay: RunLayout, r: int, seed_bank: Path | None, *, new_run_reads_seed: bool = False
                     ) -> list[RunInput]:
    """Round r's bank and the analyst's spool/ and candidates/ files already written (compile
    reads them). `new_run_reads_seed`: round 0 without a bank reads SEED_BANK instead (train)."""
    out: list[RunInput] = []
    bank = lay.bank_in(r)
    if r == 0 and new_run_reads_seed and not bank.is_file():
        out += seed(seed_bank)
    else:
        redo = (f"move {bank} aside: `make resume` then redoes round {r - 1}'s inject from its compiled.json "
                "and gate decisions" if r else f"move {bank} aside: `make resume` then writes it again from SEED_BANK")
        out.append(RunInput(bank, "bank", redo))
    for d, schema in ((lay.spool(r), "spool"), (lay.candidates(r), "candidates")):
        out += [RunInput(p, schema, f"the analyst wrote {p}: move it out of the run directory (compile then goes "
                                    "without it), or restore it from a copy of the run")
                for p in sorted(d.glob("*.json"))]
    return out


def compiled(lay: RunLayout, r: int) -> RunInput:
    return RunInput(lay.compiled(r), "bank", f"move {lay.compiled(r)} aside: `make resume` then compiles the round "
                                             "again")


def gate_decisions(lay: RunLayout, r: int) -> list[RunInput]:
    """The gate's decisions.json, when the gate has written it."""
    decisions = lay.gate_decisions(r)
    return [RunInput(decisions, "gate_decisions", f"move {lay.gate_dir(r)} aside: `make resume` then plays the "
                                                   "round's gate again")] if decisions.is_file() else []


def problem(inp: RunInput) -> str | None:
    """What is wrong with one file (its path, the JSON path of the field and the rule), or None."""
    try:
        if inp.schema == "bank":
            load_bank(inp.path)
        else:
            jsonfiles.load_validated(inp.path, inp.schema)
    except ToolkitError as exc:
        return f"{exc.what}: {exc.where}"
    return None
