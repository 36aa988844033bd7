"""`make migrate-pack`: what a run needs on a new machine, as a manifest and a pack tree (M3, M5,
M18, M19).

The pack lives in RUNS_DIR/.migration/<RUN_NAME>/:

    manifest.json     every file: root, path (relative to the root), size, BLAKE2b-256; the hf
                      symlink; what is left behind and the command that re-creates it
    config.json       the old machine's resolved configuration, no secrets, for people (the new
                      machine compares its configuration with the packed run.json)
    conda-<env>.yml   `conda env export` of the slime and shopsim envs (or why it failed)
    files/<root>/...  the files, hardlinked (no extra disk; a symlink where the root is on another
                      filesystem), so one rsync per root fetches exactly the manifest

Roots: run = RUNS_DIR/<RUN_NAME>, save = TRAIN_SAVE/<RUN_NAME> (the newest complete checkpoint,
its tracker and rollout state, the current HF export), data = DATA_DIR (MIGRATE_DATA=1),
hf_model / torch_dist_model (MIGRATE_MODELS=1), jit_cache = TRAIN_SAVE/<RUN_NAME>/jit-cache (with
the GPU model and driver it was compiled on: the new machine takes it only if they match). Hash: BLAKE2b-256 (hashlib): a strong hash, and
faster than SHA-256 on the CPU for multi-GB checkpoints.

Left behind, by design: the old machine's process state (pids/, lock, slime-job.json), the
report (make report), the rounds' slime.yaml (the train stage writes them again) -- all of which
hold this machine's paths. The logs move to logs/previous-machine/ (history: they keep the old
paths); W&B's offline runs travel as they are, so `make wandb-sync` can still upload them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
from fnmatch import fnmatch
from pathlib import Path

from pyhelpers.config import jit_caches
from pyhelpers.config.load import Config
from pyhelpers.errors import ToolkitError
from pyhelpers.jsonfiles import load_json, write_json_atomic
from pyhelpers.overview import rehearsal
from pyhelpers.run import checkpoints, lock
from pyhelpers.run.layout import RunLayout

HASH = "blake2b-256"
CHUNK = 8 << 20
# (relative path pattern, why it stays behind, what re-creates it)
LEFT_BEHIND = (
    ("pids/", "the old machine's process records", "nothing: `make resume` starts fresh processes"),
    ("lock", "the old machine's driver lock", "nothing"),
    ("slime-job.json", "the old machine's Ray job id", "the train stage submits a new job"),
    ("ray/", "the old machine's Ray token and a job's W&B netrc (secrets) and session list",
     "the Ray head makes a new token, the train stage a new netrc"),
    ("report/", "the report", "make report"),
    (".matplotlib/", "matplotlib's font cache (the report's)", "nothing: make report builds it again"),
    (".report-cache/", "the report's cache of W&B histories", "nothing: make report builds it again"),
    ("rounds/*/slime.yaml", "the rounds' plugin configuration (old paths)", "the train stage writes it again"),
    ("rounds/*/plugin.started", "a job's start marker", "the next job writes it"),
    ("wandb/data/", "W&B's staging cache", "nothing"),
    ("wandb/cache/", "W&B's cache", "nothing"),
)


def file_hash(path: Path) -> str:
    h = hashlib.blake2b(digest_size=32)
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def pack_dir(runs_dir: Path, run_name: str) -> Path:
    return Path(runs_dir) / ".migration" / run_name


def _left_behind(rel: str) -> bool:
    return any(rel.startswith(pat) if pat.endswith("/") else fnmatch(rel, pat) for pat, _, _ in LEFT_BEHIND)


def _run_files(run_dir: Path) -> list[tuple[Path, str]]:
    """(source, relative path in the pack) of the run dir's files; logs move to previous-machine/."""
    out = []
    for p in sorted(run_dir.rglob("*")):
        if not p.is_file() or p.is_symlink():
            continue
        rel = p.relative_to(run_dir).as_posix()
        if _left_behind(rel):
            continue
        if rel.startswith("logs/") and not rel.startswith("logs/previous-machine/"):
            rel = "logs/previous-machine/" + rel[len("logs/"):]
        out.append((p, rel))
    return out


def _save_files(lay: RunLayout) -> tuple[list[tuple[Path, str]], list[dict], int | None]:
    mega, out = lay.megatron, []
    newest = checkpoints.newest_complete(mega)
    tracked = checkpoints.read_tracker(mega)
    if newest is not None:
        if tracked != newest:
            raise ToolkitError(f"the checkpoint tracker names iteration {tracked}, the newest complete save is "
                               f"{newest}", str(mega), "finish or resume the run first (make resume), then pack")
        it_dir = checkpoints.iter_dirs(mega)[newest]
        out += [(p, p.relative_to(lay.save_dir).as_posix()) for p in sorted(it_dir.rglob("*")) if p.is_file()]
        out.append((mega / checkpoints.TRACKER, f"megatron/{checkpoints.TRACKER}"))
        state = checkpoints.rollout_states(mega).get(newest)
        if state is not None:
            out.append((state, f"megatron/rollout/{state.name}"))
    links = []
    hf = checkpoints.hf_target(lay.hf_link)
    if hf is not None and hf.is_dir():
        out += [(p, p.relative_to(lay.save_dir).as_posix()) for p in sorted(hf.rglob("*")) if p.is_file()]
        links.append({"root": "save", "path": lay.hf_link.name, "target": hf.name})
    marker = lay.save_dir / rehearsal.MARKER
    if marker.is_file():
        out.append((marker, rehearsal.MARKER))
    return out, links, newest


def _tree(root: Path) -> list[tuple[Path, str]]:
    return [(p, p.relative_to(root).as_posix()) for p in sorted(root.rglob("*")) if p.is_file()]


def _link_into(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists() or dst.is_symlink():
        dst.unlink()
    try:
        os.link(src, dst)
    except OSError:  # another filesystem: rsync -L follows the symlink on the new machine's request
        os.symlink(src.resolve(), dst)


def _conda_export(cfg: Config, env: str) -> str:
    """`conda env export` of env, through the same activation the run uses; or why it failed."""
    cmd = f'source "{cfg.CONDA_ROOT}/etc/profile.d/conda.sh" && conda env export -n "{env}"'
    try:
        done = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"# conda env export -n {env} failed: {exc}\n"
    if done.returncode != 0:
        return f"# conda env export -n {env} failed (exit {done.returncode}): {done.stderr.strip()[:500]}\n"
    return done.stdout


def recreate_commands(cfg: Config) -> list[dict]:
    """What the pack leaves out, and the command that re-creates it on the new machine."""
    out = [{"what": "the conda envs slime and shopsim (M5)",
            "command": "restore the system image (M18), or conda env create -f env/conda/slime.yml (and shopsim.yml); "
                       "then make install-hooks and make doctor"}]
    if not cfg.MIGRATE_MODELS:
        out += [{"what": f"the base model's HF weights (HF_MODEL={cfg.HF_MODEL})",
                 "command": "copy MODELS_DIR from the old machine, or download Qwen3.5-4B into HF_MODEL"},
                {"what": "its torch_dist conversion (TORCH_DIST_MODEL)", "command": "make convert-base"}]
    if not cfg.MIGRATE_DATA:
        out.append({"what": "the task files (DATA_DIR)",
                    "command": "pyhelpers data build --source <ShopSimulator's fine_items files> (docs/shopsim_protocol.md)"})
    out.append({"what": "older Megatron checkpoints", "command": "none: rotation keeps only the newest, which is packed"})
    return out


def pack(cfg: Config, lay: RunLayout, progress=lambda s: None) -> Path:
    if not lay.manifest.is_file():
        raise ToolkitError(f"there is no run named {cfg.run_name} to pack", str(lay.run_dir),
                           "set RUN_NAME to the run you mean")
    if not lock.lock_free(lay.lock):
        raise ToolkitError("the run is in progress: its files change while it trains", str(lay.lock),
                           "stop it first (make stop), then make migrate-pack")
    out = pack_dir(cfg.RUNS_DIR, cfg.run_name)
    if (out / "files").exists():
        shutil.rmtree(out / "files")  # links only: the run's files are not touched
    save_files, links, newest = _save_files(lay)
    roots: dict[str, tuple[Path, list[tuple[Path, str]]]] = {
        "run": (lay.run_dir, _run_files(lay.run_dir)), "save": (lay.save_dir, save_files)}
    if cfg.MIGRATE_DATA:
        roots["data"] = (cfg.DATA_DIR, _tree(cfg.DATA_DIR))
    caches = jit_caches.root(lay.save_dir)
    if caches.is_dir():  # carried only to the same GPU model and driver (make migrate-machine decides)
        roots["jit_cache"] = (caches, _tree(caches))
    if cfg.MIGRATE_MODELS:
        roots["hf_model"] = (cfg.HF_MODEL, _tree(cfg.HF_MODEL))
        roots["torch_dist_model"] = (cfg.TORCH_DIST_MODEL, _tree(cfg.TORCH_DIST_MODEL))
    files, total = [], 0
    for root, (base, entries) in roots.items():
        progress(f"hashing {len(entries)} file(s) of {root} ({base})")
        for src, rel in entries:
            size = src.stat().st_size
            files.append({"root": root, "path": rel, "size": size, HASH: file_hash(src)})
            total += size
            _link_into(src, out / "files" / root / rel)
    for env in (cfg.SLIME_ENV, cfg.SHOPSIM_ENV):
        (out / f"conda-{env}.yml").write_text(_conda_export(cfg, env))
    write_json_atomic(out / "config.json", {k: v for k, v in cfg.public().items() if k not in cfg.secret_names})
    manifest = {
        "schema_version": 1, "run": cfg.run_name, "hash": HASH, "host": socket.gethostname(),
        "roots": {root: str(base) for root, (base, _) in roots.items()},  # the OLD machine's, for people
        "newest_iteration": newest, "files": files, "gpu": jit_caches.gpu_identity(cfg.NVIDIA_SMI),
        "symlinks": links, "total_bytes": total,
        "env_lock_blake2b": file_hash(cfg.SLIME_LOCK) if cfg.SLIME_LOCK.is_file() else None,
        "left_behind": [{"what": what, "paths": pat, "recreate": how} for pat, what, how in LEFT_BEHIND],
        "recreate": recreate_commands(cfg),
    }
    write_json_atomic(out / "manifest.json", manifest)
    return out


def load_manifest(out: Path) -> dict:
    return load_json(Path(out) / "manifest.json")
