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


@pytest.fixture(scope="session")
def job(tmp_path_factory):
    """slime's real train.py --debug-rollout-only, first run and resume, once for the lane
    (tests_slime/rollout_job.py): a rollout_job.Job."""
    import rollout_job

    yield from rollout_job.run(tmp_path_factory.mktemp("rollout-only"))


@pytest.fixture
def sm80(monkeypatch):
    """The GPU-arch query answers an A800's SM80 (test only: this machine has no GPU)."""
    from types import SimpleNamespace

    import torch

    sm80 = SimpleNamespace(major=8, minor=0, name="NVIDIA A800-SXM4-80GB", total_memory=80 << 30)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *_a, **_k: (8, 0))
    # Megatron's get_device_arch_version (megatron/training/utils.py:449 at 1dcf0daf) asks this one.
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *_a, **_k: sm80)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
