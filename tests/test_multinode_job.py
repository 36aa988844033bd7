"""The slime job across nodes (issue 28 items 5, 6, 8, 9): its command lines, its environment, the
doctor's InfiniBand warning, the `node-lost` restart rule. NNODES=1 stays byte-identical to the
one-node toolkit (tests/golden/plan-one-node.txt, written by the toolkit before multi-node existed)."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import ROOT

from pyhelpers.config import load as config
from pyhelpers.run import plan as runplan
from pyhelpers.run.layout import from_config

GOLDEN = ROOT / "tests" / "golden"
MODEL_ARGS = ["--num-layers", "32"]


def _plan_text(env: dict, tmp_path: Path) -> str:
    """`make plan`'s lines with this test's own paths and the machine's free space made neutral."""
    cfg = config.load(env)
    text = "\n".join(runplan.plan(cfg, from_config(cfg), model_args=MODEL_ARGS)) + "\n"
    text = text.replace(cfg.ray_temp_dir, "<RAY_TEMP>").replace(str(tmp_path), "<TMP>").replace(str(ROOT), "<ROOT>")
    return re.sub(r"[0-9.]+ GB free", "<N> GB free", text)


def test_a_one_node_plan_is_byte_identical_to_the_one_node_toolkits(toolkit_env, tmp_path):
    assert _plan_text(toolkit_env, tmp_path) == (GOLDEN / "plan-one-node.txt").read_text()
