"""The SkillBank: skill/bank records, deterministic compile, rendering, gate-decision application.

Modules: ``text`` (normalization, ids, lexical features), ``tokens`` (token counting),
``render`` (the skills block; stdlib-only, imported by the rollout plugin), ``similarity``
(near-duplicate indexes), ``bank`` (records, load/write, hashes), ``compile`` (merge candidates),
``decisions`` (gate selection and decision application), ``report`` (show/diff rows).
This file imports nothing, so ``import pyhelpers.skills.render`` stays cheap.
"""
