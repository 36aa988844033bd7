"""What `make train` prints when it refuses to start on a machine that cannot run it (issue 40 item
13): a machine without GPUs got a 430-character line about the system disk, and with a data disk
set the whole 72-line doctor report. Now: the configuration's errors wrapped to a terminal's
width, and the preflight's one entry per FAILed check (its name and fix) with a pointer to
`make doctor` for the full report -- all before anything of the run starts."""

from __future__ import annotations

import json
import os
import subprocess

from conftest import ROOT, run_pyhelpers

WIDTH = 80  # a terminal's width: every line must be readable there


def _make_train(env: dict[str, str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in env.items() if k not in ("MAKEFLAGS", "MFLAGS")}
    return subprocess.run(["make", "train"], cwd=ROOT, env={**env, "PATH": os.environ["PATH"]},
                          capture_output=True, text=True, timeout=300)


def _too_long(text: str) -> list[str]:
    """Lines over WIDTH, except a single word (a deep path) alone on its line, which cannot be wrapped."""
    return [ln for ln in text.splitlines() if len(ln) > WIDTH and len(ln.split()) > 1]


def _gpu_less(toolkit_env, tmp_path) -> dict[str, str]:
    """A machine with a data disk but no GPUs, no conda, no models, no task files."""
    (tmp_path / ".env").write_text("WANDB_API_KEY=wk-preflight-test\nDASHSCOPE_API_KEY=sk-preflight-test\n")
    return {**toolkit_env, "CONDA_ROOT": str(tmp_path / "no-conda"), "NVIDIA_SMI": str(tmp_path / "no-nvidia-smi"),
            "MODELS_DIR": str(tmp_path / "models"), "DATA_DIR": str(tmp_path / "data"),
            "SHOPSIM_DIR": str(tmp_path / "ShopSimulator")}


def test_a_gpu_less_machine_gets_one_entry_per_failed_check_and_the_pointer_to_make_doctor(toolkit_env, tmp_path):
    env = _gpu_less(toolkit_env, tmp_path)
    doc = json.loads(run_pyhelpers(["doctor", "--json"], env, timeout=120).stdout)
    failed = [c["name"] for c in doc["checks"] if c["status"] == "FAIL"]
    assert len(failed) >= 5 and {"conda", "gpus", "model-hf"} <= set(failed), failed

    r = _make_train(env)
    assert r.returncode != 0, r.stdout + r.stderr
    out = r.stdout + r.stderr
    entries = [ln.split()[1] for ln in out.splitlines() if ln.startswith("FAIL ")]
    assert sorted(entries) == sorted(failed), out  # exactly one entry per FAILed check
    for name in failed:  # each with its fix
        fix = next(c["fix"] for c in doc["checks"] if c["name"] == name)
        assert " ".join(fix.split()[:3]) in " ".join(out.split()), (name, fix, out)
    assert not [ln for ln in out.splitlines() if ln.startswith(("PASS", "SKIP", "WARN", "      |"))], out
    assert not _too_long(out), _too_long(out)
    last = [ln for ln in r.stderr.splitlines() if ln.startswith("shopsimrl: ")][-1]
    assert "make doctor" in last and "full report" in last, r.stderr
    joined = " ".join(out.split())
    assert "`make rehearse`" in joined and "`make doctor PROFILE=rehearse`" in joined, out
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("driver.log"))  # nothing started


def test_the_system_disk_error_of_a_fresh_machine_fits_the_terminal(toolkit_env, tmp_path):
    """The first `make train` on a machine without a data disk: TRAIN_SAVE on the system disk, in a
    430-character line. In an 80-column terminal every line fits now; a pipe (a log, grep) still
    gets each configuration error on one line."""
    from support.tmux import Pane

    env = {**_gpu_less(toolkit_env, tmp_path), "SYSTEM_DISK": "/", "DATA_DISK": str(tmp_path / "autodl-tmp")}
    env.pop("TRAIN_SAVE")
    env = {k: v for k, v in env.items() if k not in ("MAKEFLAGS", "MFLAGS", "COLUMNS")}
    pane = Pane(tmp_path, "make train; echo TRAIN-EXIT=$?", env, width=WIDTH)
    try:
        pane.wait_for(r"^TRAIN-EXIT=\d+$")
        shown = pane.text()  # (lines the terminal itself wrapped are joined back: a long one shows whole)
    finally:
        pane.close()
    assert "TRAIN-EXIT=0" not in shown, shown
    joined = " ".join(shown.split())
    assert f"TRAIN_SAVE='{tmp_path}/autodl-tmp/train_save' is on the system disk" in joined, shown
    assert "`make rehearse` runs the whole run on stand-ins" in joined, shown
    assert not _too_long(shown), _too_long(shown)

    piped = _make_train(env)
    assert any(ln.startswith("error: TRAIN_SAVE=") and ln.endswith("on stand-ins)") for ln in piped.stderr.splitlines())


def test_a_make_train_start_resolves_its_configuration_once(toolkit_env, tmp_path):
    """Issue 43: bin/train resolved the configuration again in every process it started (config
    export, the preflight's doctor, cleanup, init, the loop), each reading defaults.env and .env.
    Now `config export` resolves it and hands it on; the preflight takes it from there. One line
    per resolution (SHOPSIMRL_RESOLVE_LOG: tests/fakes/README.md)."""
    log = tmp_path / "resolutions.log"
    r = _make_train({**_gpu_less(toolkit_env, tmp_path), "SHOPSIMRL_RESOLVE_LOG": str(log)})
    assert r.returncode != 0 and "preflight failed" in r.stderr, r.stdout + r.stderr
    lines = log.read_text().splitlines()
    resolved = [ln for ln in lines if ln.split()[2] == "resolved"]
    assert len(resolved) == 1, f"{len(resolved)} resolutions in one `make train` start:\n" + "\n".join(lines)
    assert len(lines) >= 2, "the preflight was not handed the configuration:\n" + "\n".join(lines)
