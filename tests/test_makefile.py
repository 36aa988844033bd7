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


def test_setup_never_reinstalls_under_processes_running_from_the_venv(tmp_path):
    """`make train` after a pull runs setup before the run lock can refuse it: setup itself must
    leave a venv alone while a live run's processes use it."""
    import os
    import signal
    import sys

    root = tmp_path / "clone"
    for rel in ("bin/setup", "bin/lib.sh", "pyhelpers/procs/venv_users.py", "env/requirements.txt", "pyproject.toml"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, root / rel)
    (root / "env" / "system-packages.txt").write_text("")
    calls = tmp_path / "python-calls"
    venv_python = root / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    # A stand-in for the venv's python: records how setup calls it; `-c` runs as a live process would.
    venv_python.write_text(f'#!/usr/bin/env bash\necho "$*" >> {calls}\n[[ "$1" == -c ]] && exec -a "$0" sleep 60\n'
                           "exit 0\n")
    venv_python.chmod(0o755)
    live = subprocess.Popen([str(venv_python), "-c", "a live run"], cwd=root, start_new_session=True)
    try:
        res = subprocess.run([str(root / "bin" / "setup")], cwd=root, capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PYTHON": sys.executable})
        assert res.returncode == 1, res.stdout + res.stderr
        assert "not updating .venv: these processes run from it" in res.stderr and str(live.pid) in res.stderr
        assert "-m pip" not in calls.read_text()
    finally:
        os.killpg(live.pid, signal.SIGKILL)
        live.wait()


def test_make_rehearse_refuses_round_without_resume(tmp_path, rehearsal_world):
    """ROUND only means something to a resumed rehearsal: without RESUME=1 it was silently dropped."""
    from support.rehearsal import rehearse_env

    env = rehearse_env(tmp_path, rehearsal_world, tracked=False)
    res = subprocess.run(["make", "rehearse", "ROUND=1"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode != 0
    assert "ROUND=1" in res.stderr and "make rehearse RESUME=1 ROUND=1" in res.stderr, res.stderr
    assert not (tmp_path / "runs" / "rehearsal").exists()
