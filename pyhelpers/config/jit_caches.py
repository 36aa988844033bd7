"""Compile/JIT caches of every GPU process of a run, on the data disk under the run's weights dir
(TRAIN_SAVE/<RUN_NAME>/jit-cache/), so each round's job and each eval server start finds the
kernels the earlier ones compiled, the small system disk (M2) does not fill with them, and
`make migrate-machine` can carry them to a machine of the same GPU model and driver.

Each variable is the one the pinned version reads (read in its source):

| variable | read by | where (pinned version) |
|---|---|---|
| TRITON_CACHE_DIR | Triton (SGLang's and Megatron's Triton kernels; torch inductor's too) | triton 3.6.0 triton/knobs.py:347 (default ~/.triton/cache) |
| TORCHINDUCTOR_CACHE_DIR | torch.compile's inductor (FX graph and kernel caches) | torch torch/_inductor/runtime/cache_dir_utils.py cache_dir() (default /tmp/torchinductor_<user>) |
| FLASHINFER_WORKSPACE_BASE | FlashInfer's JIT ops, under BASE/.cache/flashinfer | flashinfer-python 0.6.12 flashinfer/jit/env.py:51-55, 148-149 (default ~) |
| SGLANG_DG_CACHE_DIR | DeepGEMM's JIT kernels in SGLang: SGLang overwrites DG_JIT_CACHE_DIR with it | sglang 0.5.15.post1 srt/layers/deep_gemm_wrapper/compile_utils.py:37-40, srt/environ.py:600 (default ~/.cache/deep_gemm) |
| DG_JIT_CACHE_DIR | DeepGEMM used outside SGLang | sgl-deep-gemm 0.1.4 (the name is in deep_gemm/_C.so) |
| SGLANG_CACHE_DIR | SGLang's FlashInfer autotune results | sglang 0.5.15.post1 srt/environ.py:956, srt/model_executor/runner/flashinfer_autotune.py:138-146 (default ~/.cache/sglang) |
| CUDA_CACHE_PATH | the CUDA driver's cache of PTX compiled for this GPU | CUDA C++ Programming Guide, "CUDA Environment Variables" (default ~/.nv/ComputeCache) |

The defaults live in the home directory or /tmp: on one machine they are warm from the second
start on already (and /tmp's are lost at a reboot); what this adds is the data disk, the run's
own copy, and the migration. Kernels compiled for one GPU model or driver are not reused on
another (each cache keys on the architecture or rebuilds): migrate only carries them to the same.
"""

from __future__ import annotations

from pathlib import Path

VARIABLES: tuple[tuple[str, str], ...] = (  # (variable, sub-directory of the run's jit-cache/)
    ("TRITON_CACHE_DIR", "triton"),
    ("TORCHINDUCTOR_CACHE_DIR", "inductor"),
    ("FLASHINFER_WORKSPACE_BASE", "flashinfer"),
    ("SGLANG_DG_CACHE_DIR", "deep_gemm"),
    ("DG_JIT_CACHE_DIR", "deep_gemm"),
    ("SGLANG_CACHE_DIR", "sglang"),
    ("CUDA_CACHE_PATH", "cuda"),
)
DIR = "jit-cache"  # under TRAIN_SAVE/<RUN_NAME>/
# What the disk plan reserves for them: an estimate (no published figure): a dense 4B model's
# Triton, FlashInfer, DeepGEMM and CUDA kernels are tens to hundreds of MB each.
EXPECTED_BYTES = 2 * 10**9


def root(save_dir: Path) -> Path:
    return Path(save_dir) / DIR


def env(cfg) -> dict[str, str]:
    """The variables for a GPU process of the run (empty with JIT_CACHE_ON_DATA_DISK=0: the
    programs' own defaults)."""
    if not cfg.JIT_CACHE_ON_DATA_DISK:
        return {}
    base = root(cfg.save_dir)
    return {var: str(base / sub) for var, sub in VARIABLES}


def size_bytes(save_dir: Path) -> int:
    """What the run's caches hold now (the disk plan counts it)."""
    base = root(save_dir)
    if not base.is_dir():
        return 0
    return sum(p.stat().st_size for p in base.rglob("*") if p.is_file() and not p.is_symlink())


QUERY = ["--query-gpu=index,name,compute_cap,memory.total,memory.used,driver_version", "--format=csv,noheader"]


def gpu_identity(nvidia_smi: str) -> dict | None:
    """{"name", "driver"} of GPU 0 as nvidia-smi reports them; None without a GPU or nvidia-smi."""
    import subprocess  # local: only migrate-pack/-machine ask

    try:
        done = subprocess.run([nvidia_smi, *QUERY], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    rows = [[c.strip() for c in line.split(",")] for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not rows or len(rows[0]) < 6:
        return None
    return {"name": rows[0][1], "driver": rows[0][5]}


def carry(packed: dict | None, here: dict | None) -> tuple[bool, str]:
    """Whether make migrate-machine carries the packed caches: only onto the same GPU model and
    driver (kernels compiled for one are rebuilt, or refused, on another); and why."""
    if packed is None or here is None:
        which = "the old machine's" if packed is None else "this machine's"
        return False, f"JIT caches not carried: {which} GPU is unknown (nvidia-smi); the first round compiles them again"
    if packed != here:
        return False, (f"JIT caches not carried: packed on {packed['name']} with driver {packed['driver']}, this machine "
                       f"has {here['name']} with driver {here['driver']}; the first round compiles them again")
    return True, f"JIT caches carried: the same GPU ({here['name']}) and driver ({here['driver']})"
