"""make doctor's acceptance on a GPU-less machine: FAIL/SKIP lines with fixes, no traceback,
the rehearse profile, and no secret value in its output."""

from __future__ import annotations

import json

from conftest import run_pyhelpers

FAKE_KEYS = ("wk-DOCTOR-SECRET-1", "sk-DOCTOR-SECRET-2")


def _env(toolkit_env, tmp_path):
    (tmp_path / ".env").write_text(f"WANDB_API_KEY={FAKE_KEYS[0]}\nDASHSCOPE_API_KEY={FAKE_KEYS[1]}\n")
    return {**toolkit_env, "CONDA_ROOT": str(tmp_path / "no-conda"), "NVIDIA_SMI": str(tmp_path / "no-nvidia-smi")}


def test_full_profile_fails_with_fixes_and_no_traceback(toolkit_env, tmp_path):
    r = run_pyhelpers(["doctor"], _env(toolkit_env, tmp_path), timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert "Traceback" not in out
    fails = [line for line in r.stdout.splitlines() if line.startswith("FAIL")]
    assert fails and all("(fix:" in line for line in fails), [x for x in fails if "(fix:" not in x]
    assert any(line.split()[1] == "conda" for line in fails)


def test_rehearse_profile_skips_what_stand_ins_replace(toolkit_env, tmp_path):
    r = run_pyhelpers(["doctor", "--profile", "rehearse", "--json"], _env(toolkit_env, tmp_path), timeout=120)
    assert "Traceback" not in r.stderr
    doc = json.loads(r.stdout)
    text = json.dumps(doc)
    status = {c["name"]: c["status"] for c in doc["checks"]} if "checks" in doc else {}
    for name in ("conda", "versions", "cudnn", "gpus", "arch"):
        assert status.get(name) == "SKIP", (name, status)
    for key in FAKE_KEYS:
        assert key not in text and key not in r.stderr
