"""`make migrate-machine FROM=...`: a packed run onto this machine, verified, at this machine's
paths (M3, M5, M18, M19). FROM is the pack directory `make migrate-pack` printed on the old
machine: `user@host:/path/to/runs/.migration/<RUN>` (rsync over SSH) or a mounted path.

In order, each step safe to repeat (re-running after an interruption continues where it stopped):

1. the manifest fetched; the old RUN_NAME must be this configuration's RUN_NAME;
2. the environment checks of `make doctor` (conda envs, versions, cuDNN hook, GPUs, TE/apex arch,
   system disk, legacy symlinks) and free space for what is still to copy -- before copying;
3. every destination root checked: not through a broken symlink or one into the system disk (M3);
4. rsync per root (-a, --partial-dir: an interrupted file is resumed and never left under its
   real name; files already complete are not copied again; progress shown);
5. every file's BLAKE2b-256 verified; a mismatch is deleted and fetched again once, and if it still
   differs it is reported as damaged at the source -- nothing is resumed from it;
6. the `hf` symlink re-created (relative);
7. the data/model checks of `make doctor`, W&B login, .env (secrets are never copied), and the
   packed configuration compared with this one (run.json, architecture §3);
8. the exact `make resume` that continues the run.

Until step 5 passes, runs/<RUN>/MIGRATING makes `make resume` refuse. Exit status: 0 ready to
resume; 3 copied and verified, but the TODO lines must be done first; 1 stopped (the reason).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pyhelpers.capacity import diskplan
from pyhelpers.capacity.diskguard import free_bytes
from pyhelpers.config import jit_caches
from pyhelpers.config.check import device_of
from pyhelpers.config.load import Config
from pyhelpers.doctor.disks import _links
from pyhelpers.doctor.runner import run_checks
from pyhelpers.errors import ToolkitError
from pyhelpers.jsonfiles import load_json, write_json_atomic
from pyhelpers.migrate.pack import HASH, file_hash, pack_dir
from pyhelpers.overview import manifest
from pyhelpers.run import checkpoints
from pyhelpers.run.layout import RunLayout
from pyhelpers.stages import position

ENV_CHECKS = ("conda", "versions", "cudnn", "gpus", "arch", "system-disk", "legacy-symlinks")
AFTER_CHECKS = ("model-hf", "model-torch-dist", "train-tasks", "val-tasks", "dotenv", "secrets")
CORRUPT_HOOK = "SHOPSIMRL_TEST_CORRUPT_AFTER_COPY"  # test-only: "root/path" to damage after its copy


def dest_roots(cfg: Config, lay: RunLayout) -> dict[str, Path]:
    return {"run": lay.run_dir, "save": lay.save_dir, "jit_cache": jit_caches.root(lay.save_dir),
            "data": cfg.DATA_DIR, "hf_model": cfg.HF_MODEL, "torch_dist_model": cfg.TORCH_DIST_MODEL}


def _rsync(src: str, dst: Path, bwlimit: int, extra: list[str] | None = None) -> int:
    dst.mkdir(parents=True, exist_ok=True)
    progress = ["--info=progress2,name0", "--no-inc-recursive"] if sys.stderr.isatty() else []  # a meter for people
    argv = ["rsync", "-a", "-L", "--partial-dir=.rsync-partial", *progress,
            *(["--bwlimit", str(bwlimit)] if bwlimit > 0 else []), *(extra or []), src, f"{dst}/"]
    try:
        return subprocess.run(argv, stdin=subprocess.DEVNULL).returncode
    except FileNotFoundError:
        raise ToolkitError("rsync is not installed", "PATH", "run `make setup` (installs it as root), or "
                           "apt-get install rsync") from None


def fetch_manifest(from_: str, runs_dir: Path, bwlimit: int) -> tuple[dict, Path]:
    incoming = Path(runs_dir) / ".migration" / ".incoming"
    src = from_.rstrip("/")
    rc = _rsync(f"{src}/", incoming, bwlimit=bwlimit, extra=["--exclude", "files/"])
    manifest_file = incoming / "manifest.json"
    if rc != 0 or not manifest_file.is_file():
        raise ToolkitError(f"cannot read the pack's manifest (rsync exit {rc})", f"FROM={from_}",
                           "FROM is the directory `make migrate-pack` printed on the old machine, e.g. "
                           "root@old-host:/root/autodl-tmp/shopsimrl/runs/.migration/<RUN> or a mounted copy of it")
    data = load_json(manifest_file)
    target = pack_dir(runs_dir, data["run"])
    target.mkdir(parents=True, exist_ok=True)
    for p in incoming.iterdir():
        os.replace(p, target / p.name)
    incoming.rmdir()
    return data, target


def env_gate(cfg: Config, environ, profile: str, pack_manifest: dict, lay: RunLayout, echo) -> None:
    """Step 2-3: refuse before copying when this machine cannot run the job, or the space or a
    destination path is wrong."""
    results = run_checks(cfg, environ, profile, only=ENV_CHECKS)
    for r in results:
        echo("\n".join(r.lines(details=False)))
    failed = [r.name for r in results if r.status == "FAIL"]
    if failed:
        raise ToolkitError(f"this machine is not ready: {', '.join(failed)}", "make doctor",
                           "fix the FAIL lines above (nothing was copied), then run make migrate-machine again")
    roots = dest_roots(cfg, lay)
    system_dev = os.stat(cfg.SYSTEM_DISK).st_dev
    for root in sorted({f["root"] for f in pack_manifest["files"]}):
        dest = roots[root]
        for link, target in _links(dest):
            if not link.exists():
                raise ToolkitError(f"the {root} destination goes through a broken symlink: {link} -> {target}", str(dest),
                                   "remove the symlink, or point the knob at a real directory on the data disk")
            if os.stat(link.resolve()).st_dev == system_dev and cfg.DOCTOR_PROFILE != "rehearse":
                raise ToolkitError(f"the {root} destination resolves into the system disk through {link} -> {target} "
                                   "(M3: an old machine's legacy symlink)", str(dest),
                                   "configure the real path on the data disk in .env instead")
    dev_of = {root: device_of(dest)[0] for root, dest in roots.items()}
    need: dict[int, int] = {}
    for f in pack_manifest["files"]:
        dest = roots[f["root"]] / f["path"]
        if not (dest.is_file() and dest.stat().st_size == f["size"]):
            need[dev_of[f["root"]]] = need.get(dev_of[f["root"]], 0) + f["size"]
    for dev, n in need.items():
        where = next(roots[f["root"]] for f in pack_manifest["files"] if dev_of[f["root"]] == dev)
        free = free_bytes(where)
        echo(f"disk: {diskplan.gb(n)} to copy onto {where}'s disk, {diskplan.gb(free)} free")
        if free < n:
            raise ToolkitError(f"not enough disk space: {diskplan.gb(n)} to copy, {diskplan.gb(free)} free",
                               str(where), "free space there or point the knob at a larger disk; nothing was copied")


def copy_and_verify(cfg: Config, lay: RunLayout, from_: str, pack_manifest: dict, staging: Path, echo) -> list[str]:
    """Steps 4-5: rsync each root, then every hash; returns the files damaged at the source."""
    roots, bwlimit = dest_roots(cfg, lay), cfg.MIGRATE_BWLIMIT
    src = from_.rstrip("/")
    for root in sorted({f["root"] for f in pack_manifest["files"]}):
        files = [f for f in pack_manifest["files"] if f["root"] == root]
        echo(f"copying {root}: {len(files)} files, {diskplan.gb(sum(f['size'] for f in files))} -> {roots[root]}")
        rc = _rsync(f"{src}/files/{root}/", roots[root], bwlimit)
        if rc != 0:
            raise ToolkitError(f"rsync of {root} stopped (exit {rc})", f"FROM={from_}",
                               "check the connection and run make migrate-machine again: finished files are kept")
        _test_corruption(roots, staging, root)
    cache_path = staging / "verified.json"
    cache = load_json(cache_path) if cache_path.is_file() else {}
    damaged = []
    for f in pack_manifest["files"]:
        key, dest = f"{f['root']}/{f['path']}", roots[f["root"]] / f["path"]
        if _verified(dest, f, cache.get(key)):
            continue
        echo(f"hash mismatch: {key}; fetching it again")
        dest.unlink(missing_ok=True)
        _rsync(f"{src}/files/{f['root']}/{f['path']}", dest.parent, bwlimit=0, extra=["--checksum"])
        if not _verified(dest, f, None):
            damaged.append(key)
            continue
        cache[key] = [dest.stat().st_size, dest.stat().st_mtime_ns]
    for f in pack_manifest["files"]:
        dest = roots[f["root"]] / f["path"]
        if f"{f['root']}/{f['path']}" not in damaged and f"{f['root']}/{f['path']}" not in cache and dest.is_file():
            cache[f"{f['root']}/{f['path']}"] = [dest.stat().st_size, dest.stat().st_mtime_ns]
    write_json_atomic(cache_path, cache)
    return damaged


def _verified(dest: Path, f: dict, cached) -> bool:
    if not dest.is_file() or dest.stat().st_size != f["size"]:
        return False
    if cached and cached == [dest.stat().st_size, dest.stat().st_mtime_ns]:
        return True  # hashed by an earlier run of this migration, unchanged since
    return file_hash(dest) == f[HASH]


def _test_corruption(roots: dict[str, Path], staging: Path, copied: str) -> None:
    target = os.environ.get(CORRUPT_HOOK)
    done = staging / ".corrupted-once"
    if not target or done.exists():
        return
    root, _, rel = target.partition("/")
    if root != copied:
        return
    p = roots[root] / rel
    if p.is_file():
        data = bytearray(p.read_bytes())
        data[len(data) // 2] ^= 0xFF
        p.write_bytes(bytes(data))
        done.write_text(target)


def place_links(lay: RunLayout, pack_manifest: dict) -> None:
    for link in pack_manifest.get("symlinks", []):
        if link["root"] == "save" and link["path"] == lay.hf_link.name:
            checkpoints.flip_hf(lay.hf_link, lay.save_dir / link["target"])


def after_checks(cfg: Config, environ, profile: str, lay: RunLayout, echo) -> list[str]:
    """Step 7: what must still be done before `make resume` (empty: nothing)."""
    todo = []
    for r in run_checks(cfg, environ, profile, only=AFTER_CHECKS):
        echo(r.line())
        if r.status == "FAIL":
            todo.append(f"{r.name}: {r.fix}")
    if not cfg.env_file.is_file():
        todo.append(f"create {cfg.env_file} (secrets are never copied): cp env/example.env {cfg.env_file} && "
                    f"chmod 600 {cfg.env_file}, then fill in WANDB_API_KEY and DASHSCOPE_API_KEY")
    # W&B login: the `secrets` check above (a FAIL names the fix)
    refused, allowed = manifest.differences(load_json(lay.manifest), manifest.build(cfg))
    for line in allowed:
        echo(f"config: {line} (allowed, recorded on resume)")
    for line in refused:
        todo.append(f"config: {line} differs from the packed run (restore it in .env)")
    return todo


def resume_command(cfg: Config, lay: RunLayout) -> str:
    pos = position.position(lay, cfg.ROUNDS, cfg.BASELINE_VAL)
    if pos.finished:
        return "nothing to resume: every round is finished (raise ROUNDS to train further)"
    return f"make resume ROUND={pos.round}  (round {pos.round} at {pos.stage}: {pos.detail})"


def migrate(cfg: Config, lay: RunLayout, from_: str, environ, profile: str, echo) -> int:
    runs_dir = cfg.RUNS_DIR
    pack_manifest, staging = fetch_manifest(from_, runs_dir, cfg.MIGRATE_BWLIMIT)
    if pack_manifest["run"] != cfg.run_name:
        raise ToolkitError(f"the pack holds run {pack_manifest['run']!r}, this configuration names {cfg.run_name!r}",
                           f"FROM={from_}", f"set RUN_NAME={pack_manifest['run']} in .env (or on the command line)")
    if lay.manifest.is_file() and not lay.migrating_marker.is_file():
        raise ToolkitError(f"run {cfg.run_name} already exists on this machine", str(lay.run_dir),
                           "migrating onto it could mix two runs: move it aside, or migrate under another RUNS_DIR")
    echo(f"migrating run {pack_manifest['run']} from {from_} ({len(pack_manifest['files'])} files, "
         f"{diskplan.gb(pack_manifest['total_bytes'])}; packed on {pack_manifest['host']})")
    if any(f["root"] == "jit_cache" for f in pack_manifest["files"]):
        ok, why = jit_caches.carry(pack_manifest.get("gpu"), jit_caches.gpu_identity(cfg.NVIDIA_SMI))
        echo(why)
        if not ok:
            pack_manifest = {**pack_manifest, "files": [f for f in pack_manifest["files"] if f["root"] != "jit_cache"]}
    env_gate(cfg, environ, profile=profile, pack_manifest=pack_manifest, lay=lay, echo=echo)
    lay.run_dir.mkdir(parents=True, exist_ok=True)
    lay.migrating_marker.write_text(json.dumps({"from": from_, "why": "a migration is copying this run"}) + "\n")
    damaged = copy_and_verify(cfg, lay, from_=from_, pack_manifest=pack_manifest, staging=staging, echo=echo)
    if damaged:
        for key in damaged:
            echo(f"DAMAGED AT THE SOURCE: {key} (its hash differs from the manifest's after a second fetch)")
        raise ToolkitError(f"{len(damaged)} file(s) are damaged at the source; the run stays unusable here",
                           f"FROM={from_}", "restore them on the old machine (or pack again), then run make "
                           "migrate-machine again: only what is missing or wrong is fetched")
    place_links(lay, pack_manifest)
    lay.migrating_marker.unlink()
    echo(f"all {len(pack_manifest['files'])} files verified ({HASH})")
    todo = after_checks(cfg, environ, profile=profile, lay=lay, echo=echo)
    for line in todo:
        echo(f"TODO before resuming: {line}")
    echo(f"continue the run with: {resume_command(cfg, lay)}")
    return 3 if todo else 0
