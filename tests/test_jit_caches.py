"""Cut 5 of issue 29: every GPU process of the run keeps its compile/JIT caches on the data disk
under the run's weights dir; make plan shows them; the disk plan counts them."""

from __future__ import annotations

import pytest

from pyhelpers import stages
from pyhelpers.capacity import diskguard
from pyhelpers.config import jit_caches, load
from pyhelpers.launch import services, slime_args
from pyhelpers.run.layout import from_config

WANTED = {"TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "FLASHINFER_WORKSPACE_BASE", "SGLANG_DG_CACHE_DIR",
          "DG_JIT_CACHE_DIR", "SGLANG_CACHE_DIR", "CUDA_CACHE_PATH"}


def test_the_job_the_ray_head_and_the_eval_server_use_the_runs_caches_on_the_data_disk(toolkit_env):
    cfg = load.load()
    lay = from_config(cfg)
    base = lay.save_dir / "jit-cache"
    job = slime_args.runtime_env(cfg)["env_vars"]
    server = services.spec(cfg, lay, "eval-server", model="/m/hf").env_extra
    head = services.spec(cfg, lay, "ray-head").env_extra
    for env in (job, server, head):
        assert WANTED <= set(env)
        assert all(env[v].startswith(str(base) + "/") for v in WANTED)
    assert job["SGLANG_DG_CACHE_DIR"] == job["DG_JIT_CACHE_DIR"]  # SGLang overwrites the latter with the former


def test_off_leaves_each_programs_default(toolkit_env, monkeypatch):
    monkeypatch.setenv("JIT_CACHE_ON_DATA_DISK", "0")
    cfg = load.load()
    assert not WANTED & set(slime_args.runtime_env(cfg)["env_vars"])
    assert not WANTED & set(services.spec(cfg, from_config(cfg), "eval-server", model="/m").env_extra)


def test_the_disk_plan_counts_what_the_caches_will_grow_to(toolkit_env):
    cfg = load.load()
    lay = from_config(cfg)
    items = dict(diskguard.need(cfg, lay, "train", stages.get("train").writes, free=lambda p: 10**12).items)
    (grow,) = [n for what, n in items.items() if what.startswith("JIT caches")]
    assert grow == jit_caches.EXPECTED_BYTES
    held = jit_caches.root(lay.save_dir) / "triton" / "k.cubin"
    held.parent.mkdir(parents=True)
    held.write_bytes(b"x" * 1000)
    items = dict(diskguard.need(cfg, lay, "train", stages.get("train").writes, free=lambda p: 10**12).items)
    assert [n for what, n in items.items() if what.startswith("JIT caches")] == [jit_caches.EXPECTED_BYTES - 1000]


@pytest.mark.parametrize("on", ["1", "0"])
def test_make_plan_shows_them(toolkit_env, monkeypatch, on):
    from pyhelpers.overview import plan

    monkeypatch.setenv("JIT_CACHE_ON_DATA_DISK", on)
    cfg = load.load()
    (line,) = [x for x in plan.plan(cfg, from_config(cfg), model_args=[]) if x.startswith("JIT caches:")]
    assert ("TRITON_CACHE_DIR=" in line) == (on == "1")


def test_migrate_carries_the_caches_only_to_the_same_gpu_model_and_driver(monkeypatch):
    from conftest import ROOT

    smi = str(ROOT / "tests" / "fakes" / "bin" / "nvidia-smi")
    monkeypatch.setenv("FAKE_GPUS", "4:NVIDIA A800-SXM4-80GB:8.0:81920")
    a800 = jit_caches.gpu_identity(smi)
    assert a800 == {"name": "NVIDIA A800-SXM4-80GB", "driver": "580.159.04"}
    monkeypatch.setenv("FAKE_GPUS", "1:NVIDIA H200:9.0:143771")
    h200 = jit_caches.gpu_identity(smi)
    assert jit_caches.carry(a800, dict(a800))[0]
    ok, why = jit_caches.carry(a800, h200)
    assert not ok and "packed on NVIDIA A800-SXM4-80GB" in why and "this machine has NVIDIA H200" in why
    ok, why = jit_caches.carry(a800, {**a800, "driver": "570.86.15"})
    assert not ok and "driver 580.159.04" in why and "driver 570.86.15" in why
    assert not jit_caches.carry(None, a800)[0] and jit_caches.gpu_identity("/nonexistent/nvidia-smi") is None
