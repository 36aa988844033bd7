"""The Makefile's control and inspection targets never touch the venv a live run uses: after a
pull that changes env/requirements.txt, `make stop` must stop the run, not reinstall packages
under it first."""

from __future__ import annotations

import shutil
import subprocess

from conftest import ROOT

CONTROL = ("stop", "status", "logs", "watch", "report", "plan", "wandb-sync", "doctor", "migrate-pack", "plan-memory",
           "config", "check")


def _dry_run(target: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-n", target], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_control_and_inspection_targets_never_run_setup():
    for target in CONTROL:
        dry = _dry_run(target)
        assert dry.returncode == 0, dry.stderr
        assert "bin/setup" not in dry.stdout.splitlines(), f"make {target} would run setup"
    assert "bin/setup" in _dry_run("train").stdout.splitlines()  # the run itself still updates the venv first


def test_without_a_venv_they_say_how_to_make_one(tmp_path):
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    for target in ("stop", "status"):
        res = subprocess.run(["make", target], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert res.returncode != 0
        assert f"the toolkit's virtualenv is missing: {tmp_path}/.venv (run: make setup)" in res.stderr
