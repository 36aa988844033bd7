"""The declared defaults, for tests that build a grouping of knobs (GateKnobs, CompileOptions)
without a run: taken from env/defaults.env through a Config, never written out again here."""

from __future__ import annotations

import os
from dataclasses import replace

from pyhelpers.config.load import Config, load
from pyhelpers.gate.plan import GateKnobs
from pyhelpers.skills.compile import CompileOptions


def declared_config() -> Config:
    """Every knob at its declared default: no .env, nothing from the environment."""
    return load({"SHOPSIMRL_ENV_FILE": os.devnull})


def gate_knobs(**changed) -> GateKnobs:
    """The gate's knobs as declared, with `changed` fields replaced."""
    return replace(GateKnobs.from_config(declared_config()), **changed)


def compile_options(**fields) -> CompileOptions:
    """A compile with the declared SKILL_DUP_JACCARD and SKILL_MAX_TOKENS unless given."""
    cfg = declared_config()
    return CompileOptions(**{"dup_jaccard": cfg.SKILL_DUP_JACCARD, "max_skill_tokens": cfg.SKILL_MAX_TOKENS, **fields})
