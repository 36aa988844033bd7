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


def _with_fixtures(toolkit_env, tmp_path, **extra):
    from conftest import FAKES

    return {**_env(toolkit_env, tmp_path), "CONDA_ROOT": str(FAKES / "conda"),
            "NVIDIA_SMI": str(FAKES / "bin" / "nvidia-smi"), "CUOBJDUMP": str(FAKES / "bin" / "cuobjdump"), **extra}


def _status(r):
    return {line.split()[1]: line.split()[0] for line in r.stdout.splitlines() if line[:4] in ("PASS", "WARN", "FAIL", "SKIP")}


def test_conda_and_gpu_checks_against_the_stand_ins(toolkit_env, tmp_path):
    ok = run_pyhelpers(["doctor"], _with_fixtures(toolkit_env, tmp_path), timeout=120)
    assert _status(ok)["conda"] == "PASS" and _status(ok)["gpus"] == "PASS", ok.stdout
    assert "ids 0,1,2,3" in ok.stdout
    short = run_pyhelpers(["doctor"], _with_fixtures(toolkit_env, tmp_path, FAKE_GPUS="2:NVIDIA A800-SXM4-80GB:8.0:81920"),
                          timeout=120)
    assert _status(short)["gpus"] == "FAIL" and "Traceback" not in short.stderr
    gone = run_pyhelpers(["doctor"], _with_fixtures(toolkit_env, tmp_path, SLIME_ENV="nope"), timeout=120)
    assert _status(gone)["conda"] == "FAIL" and "SLIME_ENV=nope" in gone.stdout
