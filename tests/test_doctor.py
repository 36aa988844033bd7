"""`make doctor`: every check's PASS and FAIL path against the stand-ins of tests/fakes/.

The machine fixture is a complete, healthy "GPU machine": the conda stand-in root (copied, with
the project's hooks installed by the real `doctor install-hooks`), stand-in nvidia-smi and
cuobjdump, a system cuDNN 9.8 stand-in first on LD_LIBRARY_PATH (the memo's M4 situation),
models, task files, a ShopSimulator checkout, free loopback ports and a .env with fake keys.
Each test breaks one thing and reads what the doctor says.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import FAKES, ROOT, run_pyhelpers
from fakes.flag_lists import names, sglang_server_flags_file, slime_train_flags_file
from support.rehearsal import own_ports
from support.tokenizer import CONFIG

from pyhelpers.capacity import diskplan
from pyhelpers.config import declarations, load
from pyhelpers.doctor import arch, flags, runner
from pyhelpers.doctor.base import FAIL, PASS, Context
from pyhelpers.doctor.lockfile import matches, read_lock

WANDB_KEY = "fakewandbkey0123456789abcdef0123456789ab"
DASH_KEY = "sk-fakedashscope-9876543210"
SITE = Path("envs/slime/lib/python3.12/site-packages")


def task(i: int, split: str, messages: bool = True) -> str:
    line = {"task_id": f"t{i}", "shopsim_idx": i, "split": split, "instruction": "买一双跑鞋"}
    if messages:  # the prompt slime's Dataset reads from TRAIN_TASKS (--input-key messages)
        line["messages"] = [{"role": "user", "content": line["instruction"]}]
    return json.dumps(line, ensure_ascii=False)


@pytest.fixture
def machine(toolkit_env, tmp_path) -> dict[str, str]:
    conda = tmp_path / "conda"
    shutil.copytree(FAKES / "conda", conda, symlinks=True)
    lock = tmp_path / "slime.lock"  # the project's lock, with this interpreter's python version
    lock.write_text((ROOT / "env/slime.lock").read_text().replace(
        "python = 3.12", f"python = {sys.version_info.major}.{sys.version_info.minor}"))
    hf = tmp_path / "models/Qwen3.5-4B"
    hf.mkdir(parents=True)
    (hf / "config.json").write_text(json.dumps(CONFIG))  # Qwen3.5-4B's, as slime accepts it
    (hf / "tokenizer.json").write_text("{}")
    shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    for s in shards:
        (hf / s).write_bytes(b"\0" * 64)
    (hf / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": 2_000_000}, "weight_map": {"a": shards[0], "b": shards[1]}}))
    dist = tmp_path / "models/Qwen3.5-4B_torch_dist"
    (dist / "release").mkdir(parents=True)
    (dist / "latest_checkpointed_iteration.txt").write_text("release")
    data = tmp_path / "tasks"
    data.mkdir()
    (data / "train.jsonl").write_text("".join(task(i, "train") + "\n" for i in range(3)))
    (data / "val.jsonl").write_text("".join(task(i, "val") + "\n" for i in range(10, 12)))
    shop = tmp_path / "ShopSimulator/shop_env/shop_env"
    shop.mkdir(parents=True)
    (shop / "pack_api.py").write_text("# stand-in checkout\n")
    syscudnn = tmp_path / "system-cuda/lib64"  # the system cuDNN 9.8 of the AutoDL image (M4)
    syscudnn.mkdir(parents=True)
    (syscudnn / "libcudnn.so.9").write_text("FAKE cudnn 90800\n")
    (tmp_path / "home").mkdir()
    (tmp_path / ".env").write_text(f"WANDB_API_KEY={WANDB_KEY}\nDASHSCOPE_API_KEY={DASH_KEY}\n")
    ports = own_ports()
    env = {**toolkit_env,
           "CONDA_ROOT": str(conda), "SLIME_LOCK": str(lock), "SHOPSIMRL_FAKE_PYTHON": sys.executable,
           "NVIDIA_SMI": str(FAKES / "bin/nvidia-smi"), "CUOBJDUMP": str(FAKES / "bin/cuobjdump"),
           "MODELS_DIR": str(tmp_path / "models"), "DATA_DIR": str(data), "SHOPSIM_DIR": str(tmp_path / "ShopSimulator"),
           **ports, "WANDB_MODE": "online", "ANALYST_ENABLED": "1",
           "DISK_MARGIN_GB": "0", "HOME": str(tmp_path / "home"), "LD_LIBRARY_PATH": str(syscudnn),
           # the installed slime / Megatron / SGLang parsers: the stand-ins, built from the pinned lists
           "SLIME_DIR": str(FAKES / "slime_stub"), "MEGATRON_DIR": str(FAKES / "megatron_stub"),
           "FAKE_SGLANG_FLAGS_FILE": str(sglang_server_flags_file())}
    for k in ("CUDNN_PATH", "PYTHONPATH", "FAKE_GPUS", "FAKE_GPU_APPS", "FAKE_SMI_FAIL", "FAKE_SLIME_FLAGS_FILE"):
        env.pop(k, None)
    r = run_pyhelpers(["doctor", "install-hooks"], env)
    assert r.returncode == 0, r.stderr
    return env


def results(env, profile="full") -> dict:
    return {r.name: r for r in runner.run_checks(load.load(env), env, profile)}


def one(env, fn) -> dict:
    """Run one check family (through the runner's crash guard) and index its results by name."""
    cfg = load.load(env)
    ctx = Context(cfg, env, cfg.DOCTOR_PROFILE)
    family = fn.__name__.removeprefix("check_").replace("_", "-")
    return {r.name: r for r in runner.run_one(ctx, family, fn)}


def site(env) -> Path:
    return Path(env["CONDA_ROOT"]) / SITE


# ---- the whole doctor -------------------------------------------------------------------------

def test_healthy_machine_passes_every_check_and_exits_0(machine):
    r = run_pyhelpers(["doctor"], machine)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln[:4] in ("PASS", "WARN", "FAIL", "SKIP")]
    assert len(lines) == len(runner.NAMES) and all(ln.startswith("PASS") for ln in lines), r.stdout
    assert f"doctor: {len(runner.NAMES)} PASS, 0 WARN, 0 FAIL, 0 SKIP" in r.stdout


def test_json_output_and_no_secret_anywhere(machine):
    r = run_pyhelpers(["doctor", "--json"], machine)
    doc = json.loads(r.stdout)
    assert doc["ok"] is True and doc["counts"]["FAIL"] == 0
    assert [c["name"] for c in doc["checks"]] == list(runner.NAMES)
    assert {"name", "status", "found", "fix", "details"} <= set(doc["checks"][0])
    verbose = run_pyhelpers(["doctor", "-v"], {**machine, "NUM_GPUS": "8"})  # a FAIL, with details
    broken = run_pyhelpers(["doctor", "--json"], {**machine, "WANDB_MODE": "online", "SLIME_ENV": "nope"})
    for out in (r, verbose, broken):
        text = out.stdout + out.stderr
        assert WANDB_KEY not in text and DASH_KEY not in text
        assert "WANDB_API_KEY set" in text or out is broken


def test_gpu_less_machine_fails_with_fixes_and_no_traceback(toolkit_env, tmp_path):
    env = {**toolkit_env, "CONDA_ROOT": str(tmp_path / "nowhere"), "NVIDIA_SMI": str(tmp_path / "no-smi"),
           "SYSTEM_DISK": "/", "NUM_GPUS": "x"}
    r = subprocess.run([str(ROOT / "bin/doctor")], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "Traceback" not in r.stdout + r.stderr
    lines = r.stdout.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(("FAIL", "SKIP")):  # its fix: on a line of its own, among the wrapped ones below
            block = [line] + list(itertools.takewhile(lambda x: x.startswith(" "), lines[i + 1:]))
            assert any(ln.strip().startswith("fix: ") for ln in block), block
    assert "FAIL  conda" in r.stdout and "SKIP  versions" in r.stdout and "SKIP  arch" in r.stdout
    assert "NUM_GPUS='x' is not a whole number" in r.stdout


def test_rehearse_profile_skips_what_the_stand_ins_replace(toolkit_env, tmp_path):
    env = {**toolkit_env, "CONDA_ROOT": str(tmp_path / "nowhere"), "NVIDIA_SMI": str(tmp_path / "no-smi"),
           "SYSTEM_DISK": "/", "PROFILE": "rehearse"}
    r = subprocess.run([str(ROOT / "bin/doctor")], env=env, capture_output=True, text=True, timeout=60)
    assert "doctor: profile rehearse" in r.stdout and "Traceback" not in r.stderr
    for name in runner.REHEARSE_SKIPS:
        assert any(ln.startswith("SKIP") and f" {name} " in ln and "profile rehearse" in ln
                   for ln in r.stdout.splitlines()), name
    got = results(env, profile="rehearse")
    # (model-config is SKIP too: this machine has no HF_MODEL to read a config.json from)
    assert {n for n, x in got.items() if x.status == "SKIP" and n != "model-config"} == set(runner.REHEARSE_SKIPS)
    assert got["model-config"].found.endswith("config.json is missing"), got["model-config"]


def test_a_crashing_check_becomes_a_fail_line(machine, monkeypatch):
    def boom(ctx):
        raise RuntimeError("kaputt")

    monkeypatch.setattr(runner, "CHECKS", (("gpus", ("gpus",), boom, ()),) + runner.CHECKS[5:])
    got = results(machine)
    assert got["gpus"].status == "FAIL" and "the gpus check crashed: RuntimeError: kaputt" in got["gpus"].found
    assert got["dotenv"].status == "PASS"  # the others still ran


def test_doctor_skip_knob(machine):
    got = results({**machine, "DOCTOR_SKIP": "arch, cudnn"})
    assert got["arch"].status == "SKIP" and "DOCTOR_SKIP" in got["arch"].found
    assert got["cudnn"].status == "SKIP" and got["versions"].status == "PASS"
    bad = results({**machine, "DOCTOR_SKIP": "archh"})
    assert bad["doctor"].status == "FAIL" and "archh" in bad["doctor"].found


# ---- conda and versions -----------------------------------------------------------------------

def test_conda_missing_root_and_missing_env(machine, tmp_path):
    got = results({**machine, "CONDA_ROOT": str(tmp_path / "nowhere")})
    assert got["conda"].status == "FAIL" and "conda.sh is missing" in got["conda"].found
    assert got["versions"].status == "SKIP" and "needs conda" in got["versions"].found
    got = one({**machine, "SHOPSIM_ENV": "shop2"}, runner.conda.check_conda)
    assert got["conda"].status == "FAIL" and "SHOPSIM_ENV=shop2" in got["conda"].found
    assert "env/conda/shopsim.yml" in got["conda"].fix


def test_versions_against_the_real_lock_and_a_wrong_torch(machine):
    got = one({**machine, "SLIME_LOCK": str(ROOT / "env/slime.lock")}, runner.versions.check_versions)
    if sys.version_info[:2] != (3, 12):
        assert got["versions"].status == "FAIL" and "python" in got["versions"].found
        assert "(lock: 3.12)" in got["versions"].found
    (site(machine) / "torch/fake.json").write_text('{"version": "2.11.0+cu130", "cuda": "13.0"}')
    got = one(machine, runner.versions.check_versions)["versions"]
    assert got.status == "FAIL" and "torch 2.11.0+cu130 (lock: 2.11.0+cu129)" in got.found
    assert "SLIME_LOCK" in got.fix


def test_versions_pass_lists_what_was_found(machine):
    got = one(machine, runner.versions.check_versions)["versions"]
    assert got.status == "PASS"
    for text in ("torch 2.11.0+cu129 (CUDA 12.9)", "cuda-toolkit 12.8", "sglang 0.5.15.post1",
                 "megatron-core 0.16.0rc0", "transformer-engine 2.16.1", "nvidia-cudnn-cu12 9.17.0.29"):
        assert text in got.found


def test_lock_format():
    lock = read_lock(ROOT / "env/slime.lock")
    assert lock["torch"] == "2.11.0+cu129" and lock["python"] == "3.12"
    assert matches("3.12.8", "3.12") and matches("9.17.0.29", "9.17") and matches("2.16.1+d0067d0", "2.16.1")
    assert not matches("2.11.0+cu130", "2.11.0+cu129") and not matches("3.120", "3.12") and not matches(None, "1")


# ---- cuDNN ------------------------------------------------------------------------------------

def test_cudnn_hook_puts_pip_cudnn_before_the_system_one(machine):
    got = one(machine, runner.cudnn.check_cudnn)["cudnn"]
    assert got.status == "PASS", got
    assert "torch cuDNN 91700 = nvidia-cudnn-cu12 9.17.0.29" in got.found


def test_cudnn_without_hook_fails_with_install_hooks(machine):
    prefix = Path(machine["CONDA_ROOT"]) / "envs/slime/etc/conda"
    (prefix / "activate.d/cudnn_ldpath.sh").unlink()
    got = one(machine, runner.cudnn.check_cudnn)["cudnn"]
    assert got.status == "FAIL" and "make install-hooks" in got.fix


def test_cudnn_hook_without_effect_shows_the_system_cudnn(machine):
    hook = Path(machine["CONDA_ROOT"]) / "envs/slime/etc/conda/activate.d/cudnn_ldpath.sh"
    hook.write_text("# a hook that does nothing\n")
    got = one(machine, runner.cudnn.check_cudnn)["cudnn"]
    assert got.status == "FAIL"
    assert "LD_LIBRARY_PATH starts with" in got.found and "system-cuda/lib64" in got.found
    assert "torch uses cuDNN 90800" in got.found and "torch loaded" in got.found
    assert "make install-hooks" in got.fix


def test_cudnn_wheel_and_torch_disagree(machine):
    meta = site(machine) / "nvidia_cudnn_cu12-9.17.0.29.dist-info/METADATA"
    meta.write_text(meta.read_text().replace("9.17.0.29", "9.19.0.56"))
    got = one(machine, runner.cudnn.check_cudnn)["cudnn"]
    assert got.status == "FAIL" and "torch uses cuDNN 91700" in got.found and "91900" in got.found


def test_hooks_restore_previous_values_in_real_bash(machine, tmp_path):
    conda_sh = Path(machine["CONDA_ROOT"]) / "etc/profile.d/conda.sh"
    lib = site(machine) / "nvidia/cudnn/lib"
    script = f"""
        set -u
        source {conda_sh}
        export LD_LIBRARY_PATH=/old/lib CUDNN_PATH=/old/cudnn
        conda activate slime
        echo "A1 $LD_LIBRARY_PATH|$CUDNN_PATH"
        conda deactivate
        echo "D1 $LD_LIBRARY_PATH|$CUDNN_PATH"
        unset LD_LIBRARY_PATH CUDNN_PATH
        conda activate slime
        echo "A2 $LD_LIBRARY_PATH|$CUDNN_PATH"
        conda deactivate
        echo "D2 ${{LD_LIBRARY_PATH-unset}}|${{CUDNN_PATH-unset}}|${{_SHOPSIMRL_OLD_CUDNN_PATH-gone}}"
    """
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30, check=True).stdout
    assert f"A1 {lib}:/old/lib|{lib.parent}" in out
    assert "D1 /old/lib|/old/cudnn" in out
    assert f"A2 {lib}|{lib.parent}" in out
    assert "D2 unset|unset|gone" in out


def test_install_hooks_dry_run_keeps_a_users_own_hook(machine):
    act = Path(machine["CONDA_ROOT"]) / "envs/slime/etc/conda/activate.d/cudnn_ldpath.sh"
    act.write_text("# the user's own hook\n")
    r = run_pyhelpers(["doctor", "install-hooks", "--dry-run"], machine)
    assert r.returncode == 0 and "would copy (keeping the old file as .orig)" in r.stdout
    assert act.read_text() == "# the user's own hook\n"
    r = subprocess.run([str(ROOT / "bin/install-hooks")], env=machine, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert act.read_bytes() == (ROOT / "env/activate.d/cudnn_ldpath.sh").read_bytes()
    assert act.with_name("cudnn_ldpath.sh.orig").read_text() == "# the user's own hook\n"
    again = run_pyhelpers(["doctor", "install-hooks"], machine)
    assert again.stdout.count("keep (up to date)") == 2
    missing = run_pyhelpers(["doctor", "install-hooks"], {**machine, "SLIME_ENV": "nope"})
    assert missing.returncode == 1 and "conda env not found" in missing.stderr and "Traceback" not in missing.stderr


# ---- GPUs and architecture --------------------------------------------------------------------

def test_gpus_first_num_gpus_are_used(machine):
    got = one({**machine, "FAKE_GPUS": "8:NVIDIA A800-SXM4-80GB:8.0:81920"}, runner.gpus.check_gpus)["gpus"]
    assert got.status == "PASS" and "4 of 8 GPU(s) used: ids 0,1,2,3" in got.found and "sm_80" in got.found


@pytest.mark.parametrize("extra,text", [
    ({"FAKE_GPUS": "2:NVIDIA A800-SXM4-80GB:8.0:81920"}, "2 GPU(s) found, NUM_GPUS=4"),
    ({"NUM_GPUS": "3"}, "NUM_GPUS=3 is not divisible by TP_SIZE=2"),
    ({"FAKE_SMI_FAIL": "1"}, "couldn't communicate with the NVIDIA driver"),
    ({"FAKE_GPUS": ""}, "No devices were found"),
    ({"NVIDIA_SMI": "no-such-nvidia-smi"}, "nvidia-smi not found"),
])
def test_gpus_fail(machine, extra, text):
    got = one({**machine, **extra}, runner.gpus.check_gpus)["gpus"]
    assert got.status == "FAIL" and text in got.found and got.fix


def test_gpus_warn_on_busy_gpus(machine):
    got = one({**machine, "FAKE_GPU_APPS": "4242, python, 30000 MiB"}, runner.gpus.check_gpus)["gpus"]
    assert got.status == "WARN" and "4242, python" in got.found and "make stop" in got.fix


def test_arch_mismatch_on_h200_names_the_rebuild_settings(machine):
    got = one({**machine, "FAKE_GPUS": "4:NVIDIA H200:9.0:143771"}, arch.check_arch)["arch"]
    assert got.status == "FAIL" and "sm_90" in got.found
    assert "NVTE_CUDA_ARCHS=90" in got.fix and "TORCH_CUDA_ARCH_LIST=9.0" in got.fix
    assert any("silently" in d for d in got.details)


def test_arch_pass_when_libraries_hold_the_gpus_code(machine):
    for lib in ("transformer_engine/libtransformer_engine.so", "amp_C.so", "fused_layer_norm_cuda.so"):
        (site(machine) / lib).write_text("FAKE-CUBINS sm_80 sm_90 ptx:sm_90\n")
    got = one({**machine, "FAKE_GPUS": "4:NVIDIA H200:9.0:143771"}, arch.check_arch)["arch"]
    assert got.status == "PASS" and "sm_90" in got.found


def test_arch_without_cuobjdump(machine):
    got = one({**machine, "CUOBJDUMP": "/nonexistent/cuobjdump"}, arch.check_arch)["arch"]
    assert got.status == "FAIL" and "CUOBJDUMP" in got.fix


def test_flags_of_the_plan_pass_against_the_installed_parsers(machine):
    got = one(machine, flags.check_flags)
    assert got["slime-flags"].status == PASS, got["slime-flags"].line()
    assert got["sglang-flags"].status == PASS, got["sglang-flags"].line()


def test_flags_unknown_to_the_installed_slime_and_sglang_are_named(machine, tmp_path):
    """An installed slime/Megatron that renamed a flag would ignore it silently; SGLang would refuse
    to start. The doctor names each, from the parsers the env really has (here: the stand-ins,
    built from a list that lacks them)."""
    slime_list = tmp_path / "slime_flags.txt"
    slime_list.write_text("\n".join(f for f in names(slime_train_flags_file())
                                    if f not in ("--eps-clip-high", "--sglang-mem-fraction-static")))
    sglang_list = tmp_path / "sglang_flags.txt"
    sglang_list.write_text("\n".join(f for f in names(sglang_server_flags_file()) if f != "--context-length"))
    env = {**machine, "FAKE_SLIME_FLAGS_FILE": str(slime_list), "FAKE_SGLANG_FLAGS_FILE": str(sglang_list)}
    got = one(env, flags.check_flags)
    assert got["slime-flags"].status == FAIL
    assert "2 flag(s) of this plan: --eps-clip-high, --sglang-mem-fraction-static" in got["slime-flags"].found
    assert got["sglang-flags"].status == FAIL and ": --context-length (" in got["sglang-flags"].found


def test_flags_check_names_a_parser_that_cannot_be_built(machine, tmp_path):
    got = one({**machine, "MEGATRON_DIR": str(tmp_path / "no-megatron")}, flags.check_flags)
    assert got["slime-flags"].status == FAIL and "ModuleNotFoundError" in got["slime-flags"].found
    assert got["sglang-flags"].status == PASS


def test_arch_verdicts():
    assert arch.verdict("sm_80", {"sm_80"}, set())[0] == "ok"
    assert arch.verdict("sm_89", {"sm_80", "sm_86"}, set())[0] == "compat"
    assert arch.verdict("sm_90", {"sm_80"}, {"sm_80"})[0] == "ptx"
    assert arch.verdict("sm_90", {"sm_80"}, set())[0] == "missing"
    assert arch.verdict("sm_80", {"sm_90"}, {"sm_90"})[0] == "missing"  # cubins never run on older GPUs
    assert arch.verdict("sm_90", {"sm_90a"}, set())[0] == "missing"


# ---- disks ------------------------------------------------------------------------------------

def test_train_save_on_the_system_disk(machine, tmp_path):
    got = one({**machine, "SYSTEM_DISK": str(tmp_path)}, runner.disks.check_system_disk)["system-disk"]
    assert got.status == "FAIL" and "TRAIN_SAVE=" in got.found and "M2" in got.fix
    ok = one(machine, runner.disks.check_system_disk)["system-disk"]
    assert ok.status == "PASS" and "/dev/shm" in ok.found


def test_disk_space_shows_the_arithmetic(machine):
    got = one(machine, runner.disks.check_disk_space)["disk-space"]
    assert got.status == "PASS" and "GB" in got.found
    short = one({**machine, "DISK_MARGIN_GB": "100000000", "SAVE_OPTIM": "1"},
                runner.disks.check_disk_space)["disk-space"]
    assert short.status == "FAIL" and "needed" in short.found and "SAVE_OPTIM=0" in short.fix
    assert any("14 B/param" in d for d in short.details)
    assert any(d.strip().startswith("save: new checkpoint") for d in short.details)


def test_legacy_symlink_into_the_system_disk_warns_with_the_real_path(machine, tmp_path):
    sysdir = Path(tempfile.mkdtemp(dir="/dev/shm", prefix="doctor-sys-"))
    try:
        (sysdir / "slime").mkdir()
        (tmp_path / "envs").mkdir()
        (tmp_path / "envs/slime").symlink_to(sysdir / "slime")
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "envs/Megatron-LM").symlink_to(tmp_path / "elsewhere")
        env = {**machine, "SLIME_DIR": str(tmp_path / "envs/slime"), "MEGATRON_DIR": str(tmp_path / "envs/Megatron-LM")}
        got = one(env, runner.disks.check_legacy_symlinks)["legacy-symlinks"]
        assert got.status == "WARN" and "SLIME_DIR" in got.found and "MEGATRON_DIR" not in got.found
        assert f"SLIME_DIR={sysdir / 'slime'}" in got.fix and "M3" in got.fix
        ok = one({**machine, "MEGATRON_DIR": env["MEGATRON_DIR"]}, runner.disks.check_legacy_symlinks)
        assert ok["legacy-symlinks"].status == "PASS"
    finally:
        shutil.rmtree(sysdir)


def test_diskplan_numbers_of_the_design():
    sz = diskplan.sizes()
    assert sz.checkpoint == sz.hf_export == 8_400_000_000
    plan = diskplan.round_plan(sz, margin_gb=4)
    assert plan.peak == 25_200_000_000 and plan.need_free == 29_200_000_000
    assert diskplan.fits(plan, 33 * diskplan.GB)  # the memo's 33 GB data disk holds weights-only saves
    big = diskplan.round_plan(diskplan.sizes(save_optim=True), margin_gb=4)
    assert big.sizes.checkpoint == 58_800_000_000 and not diskplan.fits(big, 33 * diskplan.GB)
    held = diskplan.round_plan(sz, margin_gb=4, held_bytes=sz.checkpoint + sz.hf_export)
    assert held.need_free == 12_400_000_000
    assert "peak 25.2 GB - held by this run 16.8 GB + margin 4.0 GB = 12.4 GB must be free" in held.lines()[-1]


def test_diskplan_params_from_the_hf_dir(tmp_path):
    assert diskplan.params_from_hf_dir(tmp_path) is None
    (tmp_path / "config.json").write_text('{"text_config": {"dtype": "float32"}}')
    (tmp_path / "model.safetensors.index.json").write_text('{"metadata": {"total_size": 800}, "weight_map": {}}')
    assert diskplan.params_from_hf_dir(tmp_path)[0] == 200


# ---- .env and secrets -------------------------------------------------------------------------

def test_dotenv_mode_and_git(machine, tmp_path):
    env_file = Path(machine["SHOPSIMRL_ENV_FILE"])
    env_file.chmod(0o644)
    got = one(machine, runner.envfile.check_dotenv)["dotenv"]
    assert got.status == "FAIL" and "mode 644" in got.found and "chmod 600" in got.fix
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    inside = repo / ".env"
    inside.write_text("X=1\n")
    inside.chmod(0o600)
    got = one({**machine, "SHOPSIMRL_ENV_FILE": str(inside)}, runner.envfile.check_dotenv)["dotenv"]
    assert got.status == "FAIL" and "git does not ignore it" in got.found and ".gitignore" in got.fix
    (repo / ".gitignore").write_text(".env\n")
    got = one({**machine, "SHOPSIMRL_ENV_FILE": str(inside)}, runner.envfile.check_dotenv)["dotenv"]
    assert got.status == "PASS" and "ignored by git" in got.found
    got = one({**machine, "SHOPSIMRL_ENV_FILE": str(tmp_path / "none.env")}, runner.envfile.check_dotenv)
    assert got["dotenv"].status == "FAIL" and "cp env/example.env" in got["dotenv"].fix


def test_secrets_wandb_and_dashscope(machine, tmp_path):
    bare = tmp_path / "bare.env"
    bare.write_text("")
    bare.chmod(0o600)
    env = {**machine, "SHOPSIMRL_ENV_FILE": str(bare)}
    got = one(env, runner.envfile.check_secrets)["secrets"]
    assert got.status == "FAIL" and "WANDB_API_KEY not set" in got.found and "DASHSCOPE_API_KEY" in got.found
    assert "WANDB_MODE=offline" in got.fix and "ANALYST_ENABLED=0" in got.fix
    netrc = Path(env["HOME"]) / ".netrc"
    netrc.write_text("machine api.wandb.ai\n  login user\n  password notprinted123\n")
    netrc.chmod(0o600)
    got = one({**env, "ANALYST_ENABLED": "0"}, runner.envfile.check_secrets)["secrets"]
    assert got.status == "PASS" and "~/.netrc" in got.found and "notprinted123" not in got.found
    got = one({**env, "WANDB_MODE": "offline", "ANALYST_ENABLED": "0"}, runner.envfile.check_secrets)
    assert got["secrets"].status == "PASS"


def test_example_env_names_only_declared_knobs():
    knobs = declarations.read_knobs()
    lines = (ROOT / "env/example.env").read_text().splitlines()
    names = [ln.lstrip("# ").split("=", 1)[0] for ln in lines if "=" in ln and ln.lstrip("# ")[:1].isupper()]
    names = [n for n in names if n.isupper() and " " not in n]
    assert "WANDB_API_KEY" in names and "DASHSCOPE_API_KEY" in names
    assert [n for n in names if n not in knobs] == []


# ---- models and data --------------------------------------------------------------------------

def test_models_incomplete_hf_and_missing_torch_dist(machine, tmp_path):
    hf = tmp_path / "models/Qwen3.5-4B"
    (hf / "model-00002-of-00002.safetensors").unlink()
    (hf / "tokenizer.json").unlink()
    shutil.rmtree(tmp_path / "models/Qwen3.5-4B_torch_dist")
    got = one(machine, runner.models.check_models)
    assert got["model-hf"].status == "FAIL"
    assert "no tokenizer" in got["model-hf"].found and "model-00002-of-00002.safetensors" in got["model-hf"].found
    assert got["model-torch-dist"].status == "FAIL" and "make convert-base" in got["model-torch-dist"].fix


def test_torch_dist_tracker_must_name_an_existing_iteration(machine, tmp_path):
    dist = tmp_path / "models/Qwen3.5-4B_torch_dist"
    (dist / "latest_checkpointed_iteration.txt").write_text("19\n")
    got = one(machine, runner.models.check_models)["model-torch-dist"]
    assert got.status == "FAIL" and "iter_0000019" in got.found
    (dist / "iter_0000019").mkdir()
    assert one(machine, runner.models.check_models)["model-torch-dist"].status == "PASS"


def test_task_files_errors_name_file_and_line(machine, tmp_path):
    train = tmp_path / "tasks/train.jsonl"
    train.write_text(task(0, "train") + "\n{not json\n" + json.dumps({"task_id": "t9", "split": "train"}) + "\n"
                     + task(5, "train", messages=False) + "\n")
    val = tmp_path / "tasks/val.jsonl"
    val.write_text(task(0, "val") + "\n")
    got = one(machine, runner.data.check_data)
    assert got["train-tasks"].status == "FAIL"
    assert f"{train}:2: not JSON" in got["train-tasks"].found
    assert any(f"{train}:3: $: 'shopsim_idx' is a required property" in d for d in got["train-tasks"].details)
    assert any(f"{train}:4: no `messages` list" in d for d in got["train-tasks"].details)
    assert got["val-tasks"].status == "FAIL" and "also in TRAIN_TASKS" in " ".join(got["val-tasks"].details)
    val.unlink()
    assert "does not exist" in one(machine, runner.data.check_data)["val-tasks"].found


# ---- ShopSimulator and exposure ---------------------------------------------------------------

def test_shopsim_dir_and_a_held_port(machine, tmp_path):
    shutil.rmtree(tmp_path / "ShopSimulator")
    with socket.socket() as s:
        s.bind(("127.0.0.1", int(machine["SHOPSIM_PORT"])))
        s.listen()
        got = one(machine, runner.shopsim.check_shopsim)
    assert got["shopsim-dir"].status == "FAIL" and "pack_api.py" in got["shopsim-dir"].found
    assert got["shopsim-port"].status == "FAIL" and f"pid {os.getpid()}" in got["shopsim-port"].found


def test_reset_retry_knobs_are_named_idle_under_a_custom_launcher(machine):
    """SHOPSIM_RESET_RETRIES/DELAY reach pack_api only through the project's launcher, which sets
    its MAX_RETRIES/RETRY_DELAY_SECONDS; upstream's unmodified server keeps 5 x 5 s
    (pack_api.py:23-24), so a custom launcher leaves the user's values without effect."""
    custom = {**machine, "SHOPSIM_LAUNCHER": "python3 /opt/serve_shopsim.py",
              "SHOPSIM_RESET_RETRIES": "12", "SHOPSIM_RESET_DELAY": "2.5"}
    got = one(custom, runner.shopsim.check_shopsim)["shopsim-retries"]
    assert got.status == "WARN", got
    assert "SHOPSIM_RESET_RETRIES=12" in got.found and "SHOPSIM_RESET_DELAY=2.5" in got.found
    assert "5 x 5 s" in got.found and "SHOPSIM_LAUNCHER" in got.fix
    upstream = {**custom, "SHOPSIM_RESET_RETRIES": "5", "SHOPSIM_RESET_DELAY": "5"}
    assert one(upstream, runner.shopsim.check_shopsim)["shopsim-retries"].status == "PASS"
    ours = {**custom, "SHOPSIM_LAUNCHER": ""}
    assert one(ours, runner.shopsim.check_shopsim)["shopsim-retries"].status == "PASS"


def test_every_ray_port_taken_by_another_fails_naming_the_holder(machine):
    base = int(machine["RAY_PORT"])
    assert one(machine, runner.ray_ports.check_ray_ports)["ray-ports"].status == "PASS"
    for port, what in ((base + 4, "dashboard agent HTTP"), (base + 8, "autoscaler metrics"),
                       (int(machine["RAY_DASHBOARD_PORT"]), "dashboard + job API")):
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
            s.listen()
            got = one(machine, runner.ray_ports.check_ray_ports)["ray-ports"]
        assert got.status == "FAIL", what
        assert f"{what} {port}" in got.found and f"pid {os.getpid()}" in got.found and "RAY_PORT" in got.fix


def test_preflight_fails_when_a_ray_port_is_taken(machine):
    with socket.socket() as s:
        s.bind(("0.0.0.0", int(machine["RAY_PORT"]) + 1))
        s.listen()
        r = run_pyhelpers(["doctor", "--profile", "rehearse"], machine)
    assert r.returncode == 1
    assert "ray-ports" in r.stdout and f"client server {int(machine['RAY_PORT']) + 1}" in r.stdout


def test_exposure_lists_addresses_and_warns(machine):
    got = one(machine, runner.shopsim.check_exposure)["exposure"]
    assert got.status == "PASS" and "Ray's ports are all on 127.0.0.1 and require the run's token" in got.found
    base = int(machine["RAY_PORT"])
    assert any(f"dashboard + job API 127.0.0.1:{machine['RAY_DASHBOARD_PORT']}" in d and f"127.0.0.1:{base}-{base + 9}" in d
               for d in got.details)
    assert one({**machine, "SHOPSIM_HOST": "0.0.0.0"}, runner.shopsim.check_exposure)["exposure"].status == "WARN"
    with socket.socket() as s:
        s.bind(("127.0.0.1", int(machine["EVAL_PORT"])))
        s.listen()
        held = one(machine, runner.shopsim.check_exposure)["exposure"]
    assert held.status == "WARN" and "EVAL_PORT" in held.found


def test_exposure_says_who_holds_shopsim_port_when_our_simulator_runs(machine):
    """The run's own ShopSimulator holds SHOPSIM_PORT: the exposure line says so (it said 'free')."""
    import time

    from pyhelpers.procs import groups, ports

    cfg = load.load(machine)
    port = int(machine["SHOPSIM_PORT"])
    holder = f"import socket, time; s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); time.sleep(60)"
    rec = groups.start("shopsim", [sys.executable, "-c", holder], cfg.run_dir / "pids", cfg.run_dir / "logs")
    try:
        for _ in range(400):
            if not ports.port_free("127.0.0.1", port):
                break
            time.sleep(0.05)
        got = one(machine, runner.shopsim.check_exposure)["exposure"]
        line = next(d for d in got.details if d.startswith("ShopSimulator:"))
        assert "this run's ShopSimulator" in line and "free" not in line, line
        assert got.status == "PASS"
    finally:
        groups.stop(rec, 5.0, pids_dir=cfg.run_dir / "pids")
    line = next(d for d in one(machine, runner.shopsim.check_exposure)["exposure"].details
                if d.startswith("ShopSimulator:"))
    assert line.endswith("free"), line


def test_child_processes_never_get_a_secret(machine):
    cfg = load.load(machine)
    env = Context(cfg, {"PATH": "/bin", "HOME": "/h", "WANDB_API_KEY": WANDB_KEY, "SOME_TOKEN": "t0k"},
                  cfg.DOCTOR_PROFILE).child_env()
    assert env == {"PATH": "/bin", "HOME": "/h"}


def test_no_check_says_how_the_project_was_built():
    """Fix and detail lines speak to the user, never of how the project was built ("added by the
    training-loop issue")."""
    import ast
    import re

    from conftest import ROOT

    bad = []
    for path in sorted((ROOT / "pyhelpers" / "doctor").glob("*.py")):
        tree = ast.parse(path.read_text())
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                if re.search(r"\bissues?\b|added by", node.value):
                    bad.append(f"{path.name}:{node.lineno}: {node.value[:80]}")
    assert not bad, "\n".join(bad)
