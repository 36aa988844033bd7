"""The preflight of a run's own files: from where the run stands (stages/position), the files the
stages still to run in its round will read (each stage's `reads()`, stages/inputs.py), checked
against their schemas before any process starts (`make doctor`'s run-files check, bin/train).
"""

from __future__ import annotations

from pathlib import Path

from pyhelpers import stages
from pyhelpers.config.load import Config
from pyhelpers.run.layout import RunLayout
from pyhelpers.stages import position
from pyhelpers.stages.inputs import RunInput, problem, seed


def upcoming(lay: RunLayout, pos: position.Position, seed_bank: Path | None) -> list[RunInput]:
    """The files the stages from `pos` to the end of its round will read."""
    if pos.finished:
        return []
    stage = stages.get(pos.stage)
    if stage is stages.BASELINE:  # the base model's val reads only task files; round 0 follows
        return stage.reads(lay, 0, seed_bank) + stages.ROUND[0].reads(lay, 0, seed_bank)
    return stage.reads(lay, pos.round, seed_bank)


def check(cfg: Config, lay: RunLayout, fresh: bool = False) -> tuple[list[RunInput], list[tuple[RunInput, str]]]:
    """(files checked, [(file, problem)]) from where the run stands; `fresh`: as a new run (a fresh
    rehearsal replaces the previous one's files, which nothing will read)."""
    seed_bank = cfg.SEED_BANK
    inputs = seed(seed_bank) if fresh else \
        upcoming(lay, position.position(lay, cfg.ROUNDS, cfg.BASELINE_VAL), seed_bank)
    bad = [(i, p) for i in inputs if (p := problem(i))]
    return inputs, bad
