"""Disks (M2, M3): weights never on the system disk, enough free space for a round's peak
(pyhelpers.capacity.diskplan), and no configured path that depends on an old symlink into the system disk.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pyhelpers.capacity import diskplan
from pyhelpers.capacity.diskguard import tree_bytes
from pyhelpers.config.check import device_of
from pyhelpers.doctor.base import FAIL, PASS, WARN, Context, Result, result

WEIGHT_DIRS = ("TRAIN_SAVE", "MODELS_DIR", "RUNS_DIR")
RUN_STATE_BYTES = 1 * diskplan.GB  # logs, W&B offline files, spool, banks of one run
PATH_KNOBS = ("DATA_DISK", "TRAIN_SAVE", "MODELS_DIR", "RUNS_DIR", "HF_MODEL", "TORCH_DIST_MODEL", "DATA_DIR",
              "TRAIN_TASKS", "VAL_TASKS", "SEED_BANK", "CONDA_ROOT", "SLIME_DIR", "MEGATRON_DIR", "SHOPSIM_DIR",
              "MODEL_ARGS_SCRIPT", "SLIME_TRAIN", "CONVERT_TO_HF", "CONVERT_TO_TORCH_DIST")


def _system(ctx: Context) -> tuple[Path, int]:
    system = ctx.cfg.SYSTEM_DISK
    return system, os.stat(system).st_dev


def check_system_disk(ctx: Context) -> list[Result]:
    system = ctx.cfg.SYSTEM_DISK
    if not system.exists():
        return [result("system-disk", FAIL, f"SYSTEM_DISK={ctx.cfg.SYSTEM_DISK} does not exist",
                       fix="set SYSTEM_DISK to the mount point of the system disk (usually /)")]
    _, sys_dev = _system(ctx)
    bad, ok = [], []
    for knob in WEIGHT_DIRS:
        path = ctx.path(knob)
        dev, found = device_of(path)
        where = f"{knob}={path}" + ("" if found == path else f" (not created yet; nearest existing dir {found})")
        (bad if dev == sys_dev else ok).append(where)
    free = shutil.disk_usage(system).free
    details = [f"SYSTEM_DISK={system}: {diskplan.gb(free)} free (conda envs live there, M2)"] + \
        [f"on another disk: {w}" for w in ok]
    if bad:
        data = ctx.cfg.DATA_DISK
        if device_of(ctx.cfg.DATA_DISK)[0] == sys_dev:  # never suggest the value just refused
            fix = (f"M2: DATA_DISK={data} is on the system disk too: mount the data disk there, or set DATA_DISK "
                   "to where it is mounted (`df -h` lists the disks); TRAIN_SAVE and MODELS_DIR follow DATA_DISK "
                   "unless .env sets them")
        else:
            fix = f"M2: set these to directories on the data disk (DATA_DISK={data} is on it)"
        if any(b.startswith("RUNS_DIR=") for b in bad):
            fix += "; RUNS_DIR does not follow DATA_DISK: set it in .env too (e.g. RUNS_DIR=<data disk>/runs)"
        return [result("system-disk", FAIL, "on the system disk (SYSTEM_DISK=" + str(system) + "): " + "; ".join(bad),
                       fix=fix, details=details)]
    return [result("system-disk", PASS, ", ".join(WEIGHT_DIRS) + f" are not on SYSTEM_DISK={system}'s device",
                   details=details)]


def check_disk_space(ctx: Context) -> list[Result]:
    sz = diskplan.model_sizes(ctx.cfg.HF_MODEL, ctx.cfg.SAVE_OPTIM)
    save = ctx.cfg.TRAIN_SAVE
    held = tree_bytes(ctx.cfg.save_dir)
    plan = diskplan.round_plan(sz, ctx.cfg.DISK_MARGIN_GB, held)
    needs: dict[int, list[tuple[str, int, Path]]] = {}

    def need(knob: str, what: str, n: int) -> None:
        dev, found = device_of(ctx.path(knob))
        needs.setdefault(dev, []).append((f"{what} ({knob})", n, found))

    need("TRAIN_SAVE", "round peak", max(plan.peak - plan.held, 0))
    hf, dist = ctx.cfg.HF_MODEL, ctx.cfg.TORCH_DIST_MODEL
    if not (hf / "config.json").is_file():
        need("MODELS_DIR", "HF base model, to download", sz.hf_export)
    if not dist.exists():
        need("MODELS_DIR", "torch_dist base model, to convert", sz.params * diskplan.WEIGHT_BYTES)
    need("RUNS_DIR", "run state", RUN_STATE_BYTES)
    details = [f"TRAIN_SAVE={save}:"] + [f"  {line}" for line in plan.lines()]
    short, summary = [], []
    for parts in needs.values():
        mount = parts[0][2]
        free = shutil.disk_usage(mount).free
        total = sum(n for _, n, _ in parts) + plan.margin
        sums = " + ".join(f"{what} {diskplan.gb(n)}" for what, n, _ in parts)
        line = f"disk of {mount}: {sums} + margin {diskplan.gb(plan.margin)} = {diskplan.gb(total)} needed, " \
               f"{diskplan.gb(free)} free"
        details.append(line)
        summary.append(f"{mount}: {diskplan.gb(total)} needed, {diskplan.gb(free)} free")
        if free < total:
            short.append(f"{mount}: {diskplan.gb(total)} needed, {diskplan.gb(free)} free")
    if short:
        fix = "free space or use a larger data disk"
        if sz.save_optim:
            fix += "; SAVE_OPTIM=0 saves weights only (~8.4 GB instead of ~59 GB per checkpoint)"
        return [result("disk-space", FAIL, "not enough free space: " + "; ".join(short),
                       fix=fix + "; DISK_MARGIN_GB sets the reserve", details=details)]
    peak = next(s for s in plan.stages if s[1] == plan.peak)
    return [result("disk-space", PASS, f"round peak ({peak[0]}: {peak[2]} = {diskplan.gb(plan.peak)}, "
                   f"SAVE_OPTIM={int(sz.save_optim)}) fits; " + "; ".join(summary), details=details)]


def _links(path: Path) -> list[tuple[Path, str]]:
    """Symlinks among the existing prefixes of path: (link, where it points)."""
    out, cur = [], Path(path.anchor)
    for part in path.parts[1:]:
        cur = cur / part
        if not os.path.lexists(cur):
            break
        if cur.is_symlink():
            out.append((cur, os.readlink(cur)))
    return out


def check_legacy_symlinks(ctx: Context) -> list[Result]:
    system = ctx.cfg.SYSTEM_DISK
    if not system.exists():
        return [result("legacy-symlinks", FAIL, f"SYSTEM_DISK={ctx.cfg.SYSTEM_DISK} does not exist",
                       fix="set SYSTEM_DISK to the mount point of the system disk (usually /)")]
    sys_dev = os.stat(system).st_dev
    warn, via = [], []
    for knob in PATH_KNOBS:
        if not ctx.cfg.get(knob):
            continue
        path = ctx.path(knob)
        links = _links(path)
        if not links:
            continue
        real = Path(os.path.realpath(path))
        chain = ", ".join(f"{link} -> {target}" for link, target in links)
        if device_of(real)[0] == sys_dev:
            warn.append((knob, real, chain))
        else:
            via.append(f"{knob}: via {chain} (not on the system disk)")
    if warn:
        return [result("legacy-symlinks", WARN,
                       "resolve through symlinks into the system disk: " + ", ".join(k for k, _, _ in warn),
                       fix="M3: configure the real paths instead, in .env: " + " ".join(f"{k}={r}" for k, r, _ in warn)
                       + " (or move the data to the data disk); a new machine must not depend on the old symlinks",
                       details=[f"{k}={ctx.cfg[k]}: {c}; real path {r}" for k, r, c in warn] + via)]
    return [result("legacy-symlinks", PASS, "no configured path depends on a symlink into the system disk",
                   details=via)]
