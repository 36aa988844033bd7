"""Shared fixtures: an isolated configuration per test, and ways to call the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
FAKES = ROOT / "tests" / "fakes"


def _knob_names() -> list[str]:
    from pyhelpers.config import read_knobs

    return list(read_knobs())


@pytest.fixture
def toolkit_env(tmp_path, monkeypatch) -> dict[str, str]:
    """A process environment whose configuration points only into tmp_path.

    Knobs from the developer's own environment are removed; .env is tmp_path/.env (empty);
    TRAIN_SAVE is under tmp_path and SYSTEM_DISK is /dev/shm, a different device, so the
    M2 disk rule passes. The dict is also applied to os.environ for in-process CLI calls.
    """
    for name in _knob_names():
        monkeypatch.delenv(name, raising=False)
    env_file = tmp_path / ".env"
    env_file.write_text("")
    env_file.chmod(0o600)
    values = {
        "SHOPSIMRL_ENV_FILE": str(env_file),
        "RUNS_DIR": str(tmp_path / "runs"),
        "TRAIN_SAVE": str(tmp_path / "save"),
        "DATA_DISK": str(tmp_path),
        "SYSTEM_DISK": "/dev/shm",
        "WANDB_MODE": "offline",
    }
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    return {**os.environ}


def run_pyhelpers(args: list[str], env: dict[str, str], **kw) -> subprocess.CompletedProcess:
    """Run the real `python -m pyhelpers ...` in a subprocess, capturing text output."""
    return subprocess.run([sys.executable, "-m", "pyhelpers", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=kw.pop("timeout", 60), **kw)
