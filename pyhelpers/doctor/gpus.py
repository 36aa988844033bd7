"""GPUs (M1, M7, M15) from NVIDIA_SMI: count >= NUM_GPUS, model and compute capability, which ids
the run uses (the first NUM_GPUS), NUM_GPUS % TP_SIZE, and processes already holding GPU memory.

Parses `--query-gpu=index,name,compute_cap,memory.total --format=csv,noheader,nounits`, e.g.
`0, NVIDIA H200, 9.0, 143771` (docs/gpu_tool_outputs.md).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from pyhelpers.doctor.base import FAIL, PASS, WARN, CheckError, Context, Result, result, tail

QUERY = ["--query-gpu=index,name,compute_cap,memory.total", "--format=csv,noheader,nounits"]
APPS = ["--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"]
NO_GPU_FIX = ("install the NVIDIA driver or set NVIDIA_SMI=/path/to/nvidia-smi; on a machine without GPUs, "
              "`make rehearse` runs the whole run on stand-ins instead")


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    capability: str  # "8.0"
    memory_mib: int

    @property
    def sm(self) -> str:
        major, _, minor = self.capability.partition(".")
        return f"sm_{major}{minor}"


def parse_gpus(text: str) -> list[Gpu]:
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        try:
            if len(parts) < 4 or "." not in parts[-2]:
                raise ValueError
            index, name, cap, mem = int(parts[0]), ", ".join(parts[1:-2]), parts[-2], int(float(parts[-1]))
        except (ValueError, IndexError):
            raise CheckError(f"unexpected nvidia-smi line: {line.strip()!r}",
                             "check NVIDIA_SMI points at nvidia-smi of a driver that knows compute_cap "
                             "(driver 510 or newer)") from None
        gpus.append(Gpu(index, name, capability=cap, memory_mib=mem))
    return gpus


def _smi(ctx: Context, args: list[str]) -> str:
    exe = ctx.cfg.NVIDIA_SMI
    resolved = shutil.which(exe, path=ctx.environ.get("PATH")) if "/" not in exe else exe
    if not resolved or not (os.path.isfile(resolved) and os.access(resolved, os.X_OK)):
        raise CheckError(f"nvidia-smi not found (NVIDIA_SMI={exe})", NO_GPU_FIX)
    proc = ctx.run([resolved, *args], timeout=60)
    if proc.returncode != 0:
        raise CheckError(f"{exe} failed (exit {proc.returncode}): {tail(proc.stdout + proc.stderr) or 'no output'}",
                         NO_GPU_FIX)
    return proc.stdout


def gpu_list(ctx: Context) -> list[Gpu]:
    """All GPUs nvidia-smi lists, computed once per doctor run."""
    return ctx.cached("gpus", lambda: parse_gpus(_smi(ctx, QUERY)))


def used_gpus(ctx: Context) -> list[Gpu]:
    """The first NUM_GPUS GPUs (CUDA_VISIBLE_DEVICES=0..NUM_GPUS-1, M1)."""
    return gpu_list(ctx)[: ctx.cfg.NUM_GPUS]


def check_gpus(ctx: Context) -> list[Result]:
    want, tp = ctx.cfg.NUM_GPUS, ctx.cfg.TP_SIZE
    gpus = gpu_list(ctx)
    listing = [f"GPU {g.index}: {g.name}, compute capability {g.capability} ({g.sm}), {g.memory_mib} MiB"
               for g in gpus]
    if len(gpus) < want:
        return [result("gpus", FAIL, f"{len(gpus)} GPU(s) found, NUM_GPUS={want}",
                       fix=f"set NUM_GPUS={len(gpus) or 1} (and a TP_SIZE dividing it, e.g. TP_SIZE=1) in .env, "
                       f"or use a machine with {want} GPUs", details=listing)]
    if tp < 1 or want % tp:
        return [result("gpus", FAIL, f"NUM_GPUS={want} is not divisible by TP_SIZE={tp}",
                       fix="use TP_SIZE=1 or 2 with NUM_GPUS=4 (M15)", details=listing)]
    used = gpus[:want]
    kinds = sorted({(g.name, g.capability) for g in used})
    ids = ",".join(str(g.index) for g in used)
    found = (f"{want} of {len(gpus)} GPU(s) used: ids {ids} (CUDA_VISIBLE_DEVICES={ctx.cfg.cuda_visible_devices}); "
             + "; ".join(f"{n} ({used[0].sm if len(kinds) == 1 else c})" for n, c in kinds)
             + f"; TP_SIZE={tp} -> {want // tp}-way data parallel")
    if len(gpus) > want:
        listing.append(f"GPUs {want}..{len(gpus) - 1} stay unused (M1: only the first NUM_GPUS)")
    apps = [ln.strip() for ln in _smi(ctx, APPS).splitlines() if ln.strip()]
    if len(kinds) > 1:
        return [result("gpus", WARN, found + " (mixed models)",
                       fix="use identical GPUs for the first NUM_GPUS ids (CUDA_DEVICE_ORDER=PCI_BUS_ID)", details=listing)]
    if apps:
        return [result("gpus", WARN, found + f"; {len(apps)} process(es) already hold GPU memory: "
                       + "; ".join(apps[:4]),
                       fix="stop them first (a leftover run: `make stop`); they take memory the run needs",
                       details=listing)]
    return [result("gpus", PASS, found, details=listing)]
