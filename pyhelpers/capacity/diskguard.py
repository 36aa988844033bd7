"""The disk guard of the training loop (architecture §7): before a round's training and before an
export, the bytes the stage will add must fit in the free space of TRAIN_SAVE's filesystem, with
DISK_MARGIN_GB to spare. Otherwise the stage is refused before it starts, with the arithmetic,
and nothing is deleted to make room.

What a stage adds, while everything older still exists (rotation and the removal of the old
export come only after the new one is complete):

    train    one Megatron checkpoint (+ one HF export when SAVE_HF=1: slime's --save-hf)
    export   one HF export

Sizes are measured from what the run already holds when it can (the newest iter_* directory, the
current hf-* export): after round 0 the guard knows the real sizes. Before that it uses the
formula of pyhelpers/capacity/diskplan.py (parameters from the base model's safetensors index).

During training a watchdog (status) compares free space with the same number: Megatron saves
inside the slime job, so the guard itself can act only at stage boundaries.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyhelpers.capacity import diskplan
from pyhelpers.config import jit_caches
from pyhelpers.config.check import device_of
from pyhelpers.config.load import Config
from pyhelpers.errors import ToolkitError
from pyhelpers.run import checkpoints
from pyhelpers.run.layout import RunLayout

# Test hook: pretend TRAIN_SAVE's filesystem has this many bytes free (a full disk without
# filling one): a number, or @FILE holding one (read at every check, so a test can change it
# mid-run). Read only here, at the edge; never set on a real run.
FREE_BYTES_OVERRIDE = "SHOPSIMRL_TEST_FREE_BYTES"


def tree_bytes(path: Path) -> int:
    """Bytes of the regular files under path (symlinks not followed), 0 when it does not exist."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                st = os.lstat(os.path.join(root, f))
            except OSError:
                continue
            if not stat.S_ISLNK(st.st_mode):
                total += st.st_size
    return total


def free_bytes(path: Path) -> int:
    """Free bytes on the filesystem holding path (its nearest existing ancestor)."""
    override = os.environ.get(FREE_BYTES_OVERRIDE)
    if override:
        return int(Path(override[1:]).read_text().strip() if override.startswith("@") else override)
    return shutil.disk_usage(device_of(Path(path))[1]).free


@dataclass(frozen=True)
class Need:
    stage: str
    items: tuple[tuple[str, int], ...]  # (what, bytes)
    margin: int
    free: int
    where: Path

    @property
    def total(self) -> int:
        return sum(n for _, n in self.items) + self.margin

    @property
    def fits(self) -> bool:
        return self.free >= self.total

    def explain(self) -> str:
        parts = " + ".join(f"{what} {diskplan.gb(n)}" for what, n in self.items)
        return (f"{self.stage} needs {parts} + margin {diskplan.gb(self.margin)} = {diskplan.gb(self.total)}; "
                f"{diskplan.gb(self.free)} free on {self.where}")


def _sizes(cfg: Config, lay: RunLayout) -> tuple[int, int, str, str]:
    """(checkpoint bytes, HF export bytes, how each was found)."""
    formula = diskplan.model_sizes(cfg.HF_MODEL, cfg.SAVE_OPTIM)
    newest = checkpoints.newest_complete(lay.megatron)
    ckpt, ckpt_how = formula.checkpoint, "estimated"
    if newest is not None:
        ckpt, ckpt_how = tree_bytes(checkpoints.iter_dirs(lay.megatron)[newest]), f"as iter_{newest:07d}"
    hf_now = checkpoints.hf_target(lay.hf_link)
    hf, hf_how = formula.hf_export, "estimated"
    if hf_now is not None and hf_now.is_dir():
        hf, hf_how = tree_bytes(hf_now), f"as {hf_now.name}"
    return ckpt, hf, ckpt_how, hf_how


def checkpoint_writes(cfg: Config, lay: RunLayout) -> list[tuple[str, int]]:
    """What a round's training adds: a new checkpoint, and slime's own HF export with SAVE_HF=1."""
    ckpt, hf, ckpt_how, hf_how = _sizes(cfg, lay)
    items = [(f"new checkpoint ({ckpt_how})", ckpt)]
    if cfg.SAVE_HF:
        items.append((f"new HF export by --save-hf ({hf_how})", hf))
    if cfg.JIT_CACHE_ON_DATA_DISK:  # they grow while the GPU processes compile
        held = jit_caches.size_bytes(lay.save_dir)
        items.append((f"JIT caches' growth (estimate {diskplan.gb(jit_caches.EXPECTED_BYTES)} in all, "
                      f"{diskplan.gb(held)} now)", max(jit_caches.EXPECTED_BYTES - held, 0)))
    return items


def hf_export_writes(cfg: Config, lay: RunLayout) -> list[tuple[str, int]]:
    """What the converter adds: a new HF export."""
    _, hf, _, hf_how = _sizes(cfg, lay)
    return [(f"new HF export ({hf_how})", hf)]


Writes = Callable[..., list[tuple[str, int]]]  # (cfg, lay) -> [(what, bytes)]: a stage's WRITES


def need(cfg: Config, lay: RunLayout, stage: str, writes: Writes, free: Callable[[Path], int] = free_bytes) -> Need:
    """`stage`'s writes (its WRITES in the stage registry) against the free space, with the margin."""
    margin = int(cfg.DISK_MARGIN_GB * diskplan.GB)
    where = cfg.TRAIN_SAVE
    return Need(stage, tuple(writes(cfg, lay)), margin=margin, free=free(where), where=where)


def check(cfg: Config, lay: RunLayout, stage: str, writes: Writes, free: Callable[[Path], int] = free_bytes) -> Need:
    """Refuse (ToolkitError) when the stage's writes do not fit; nothing is deleted."""
    n = need(cfg, lay, stage, writes, free=free)
    if not n.fits:
        raise ToolkitError(f"not enough disk space to {stage}: {n.explain()}", f"TRAIN_SAVE={n.where}",
                           f"free {diskplan.gb(n.total - n.free)} on that disk (e.g. old runs under TRAIN_SAVE, "
                           "never this run's newest checkpoint), or lower DISK_MARGIN_GB, then `make resume`; "
                           "nothing was deleted")
    return n
