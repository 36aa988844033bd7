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
    fails = {name: lines for name, lines in _blocks(r.stdout).items() if lines[0].startswith("FAIL")}
    no_fix = [lines for lines in fails.values() if not any(ln.strip().startswith("fix: ") for ln in lines)]
    assert fails and not no_fix, no_fix
    assert "conda" in fails


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


WIDTH = 100  # pyhelpers/doctor/base.py WIDTH: a doctor line fits a terminal beside another pane


def _blocks(stdout):
    """{check name: its lines} of `make doctor`'s text output (a check's line and its continuations)."""
    blocks, name = {}, None
    for line in stdout.splitlines():
        if line[:4] in ("PASS", "WARN", "FAIL", "SKIP"):
            name = line.split()[1]
            blocks[name] = [line]
        elif name and line.startswith(" "):
            blocks[name].append(line)
        else:
            name = None
    return blocks


def test_every_line_fits_the_width_and_every_fail_keeps_its_fix(toolkit_env, tmp_path):
    """A fresh machine's FAIL lines (the system disk, the models, the keys) ran to 439 characters."""
    long_dir = tmp_path / ("a-rather-long-directory-name-" * 3) / "not-mounted"
    env = {**_env(toolkit_env, tmp_path), "SYSTEM_DISK": "/", "DATA_DISK": str(long_dir),
           "TRAIN_SAVE": str(long_dir / "train_save"), "MODELS_DIR": str(long_dir / "models"),
           "WANDB_MODE": "online"}
    (tmp_path / ".env").write_text("")
    for args in (["doctor"], ["doctor", "-v"]):
        r = run_pyhelpers(args, env, timeout=120)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
        # Only a path longer than a line may pass the width, alone on its line (it stays copyable).
        too_long = [ln for ln in r.stdout.splitlines()
                    if len(ln) > WIDTH and len((ln[23:] if ln[:4] in ("PASS", "WARN", "FAIL", "SKIP")
                                                else ln.lstrip(" |")).split()) > 1]
        assert not too_long, too_long
        blocks = _blocks(r.stdout)
        assert "system-disk" in blocks and "model-torch-dist" in blocks, r.stdout
        for name, lines in blocks.items():
            if lines[0].startswith(("FAIL", "SKIP")):
                assert any(ln.strip().startswith("fix: ") for ln in lines[1:]), (name, lines)


def test_the_system_disk_fix_never_suggests_the_data_disk_it_refused(toolkit_env, tmp_path):
    not_mounted = tmp_path / "autodl-tmp"  # under tmp_path: the same device as SYSTEM_DISK=/
    env = {**_env(toolkit_env, tmp_path), "SYSTEM_DISK": "/", "DATA_DISK": str(not_mounted),
           "TRAIN_SAVE": str(not_mounted / "train_save"), "MODELS_DIR": str(not_mounted / "models")}
    doc = json.loads(run_pyhelpers(["doctor", "--json"], env, timeout=120).stdout)
    disk = next(c for c in doc["checks"] if c["name"] == "system-disk")
    assert disk["status"] == "FAIL", disk
    assert f"e.g. DATA_DISK={not_mounted}" not in disk["fix"], disk["fix"]
    assert f"DATA_DISK={not_mounted} is on the system disk too" in disk["fix"], disk["fix"]
    assert "df -h" in disk["fix"]


def test_offline_wandb_points_at_make_wandb_sync(toolkit_env, tmp_path):
    doc = json.loads(run_pyhelpers(["doctor", "--json"], {**_env(toolkit_env, tmp_path), "WANDB_MODE": "offline"},
                                   timeout=120).stdout)
    secrets = next(c for c in doc["checks"] if c["name"] == "secrets")
    assert "`make wandb-sync`" in secrets["found"] and "`wandb sync`" not in secrets["found"], secrets


def test_a_gpu_less_machine_is_pointed_at_make_rehearse(toolkit_env, tmp_path):
    """Without GPUs or the training image, the thing to run is the rehearsal (`make rehearse`),
    not a doctor profile that only checks for it."""
    r = run_pyhelpers(["doctor", "--json"], _env(toolkit_env, tmp_path), timeout=120)
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    for name in ("gpus", "conda"):
        assert checks[name]["status"] == "FAIL", checks[name]
        assert "`make rehearse`" in checks[name]["fix"], checks[name]["fix"]
        assert "`make doctor PROFILE=rehearse`" not in checks[name]["fix"], checks[name]["fix"]
    # The closing hint (just above the verdict) names both: the rehearsal, and the doctor's check for it.
    text = run_pyhelpers(["doctor"], _env(toolkit_env, tmp_path), timeout=120).stdout.splitlines()
    start = max(i for i, ln in enumerate(text) if ln.startswith("doctor: no GPU"))
    hint = " ".join(" ".join(text[start:-1]).split())
    assert hint == ("doctor: no GPU or training image here? `make rehearse` runs the whole run on stand-ins "
                    "(`make doctor PROFILE=rehearse` checks what it needs)"), text
