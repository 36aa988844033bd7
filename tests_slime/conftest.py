"""The slime lane (make test-slime): slime's and Megatron's real code first on sys.path.

bin/test-slime sets SHOPSIMRL_SLIME_DIR and SHOPSIMRL_MEGATRON_PATH (the pinned checkouts,
Megatron with slime's patch); run any other way, the lane stops with what to run (never a skip).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SLIME = os.environ.get("SHOPSIMRL_SLIME_DIR", "")
MEGATRON = os.environ.get("SHOPSIMRL_MEGATRON_PATH", "")
if not (SLIME and MEGATRON):
    pytest.exit("tests_slime/ runs through `make test-slime SLIME_DIR=... MEGATRON_DIR=...` (bin/test-slime)",
                returncode=4)
for path in (str(ROOT / "tests"), str(ROOT), SLIME, MEGATRON):  # inserted first: Megatron, slime, the toolkit
    sys.path.insert(0, path)
os.environ["PYTHONPATH"] = os.pathsep.join([MEGATRON, SLIME, str(ROOT), os.environ.get("PYTHONPATH", "")])
