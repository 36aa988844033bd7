"""run.json: the resolved configuration a run was started with (no secrets, no machine paths),
and the comparison `make resume` makes against it (architecture §3).

A change that would corrupt the run (batch shape, TP, lengths, reward, model) is refused, naming
each difference; a harmless one (more ROUNDS, concurrency, timeouts, ports) is allowed and
recorded in the manifest's `changes` list.
"""

from __future__ import annotations

import hashlib
import platform
import subprocess
from dataclasses import replace
from pathlib import Path

from pyhelpers.config.declarations import read_knobs
from pyhelpers.config.load import Config
from pyhelpers.errors import ToolkitError
from pyhelpers.jsonfiles import load_json, load_json_or_none, write_json_atomic

SCHEMA_VERSION = 1
# An .env name that is no knob (nothing declares it): machine-specific by these endings, as a
# knob of this machine is declared `machine` (config/facts.py).
MACHINE_LOCAL_SUFFIXES = ("_DIR", "_DISK", "_ROOT", "_PORT", "_LAUNCHER", "_TRAIN", "_TEMP_DIR", "_URL")


def _machine_local(name: str, knobs: dict) -> bool:
    """Not part of the run's identity: a knob declared `machine` (it differs after a migration)."""
    return knobs[name].has("machine") if name in knobs else name.endswith(MACHINE_LOCAL_SUFFIXES)


def fixed() -> frozenset[str]:
    """The knobs a resume may not change (declared `fixed`): changing one mid-run silently changes
    what is being trained or how checkpoints load."""
    return frozenset(name for name, knob in read_knobs().items() if knob.has("fixed"))


def run_config(cfg: Config) -> dict[str, str]:
    """The run's identity-bearing configuration: public values, no secrets, no machine paths."""
    public, secrets, knobs = cfg.public(), cfg.secret_names, read_knobs()
    out = {k: v for k, v in public.items() if k not in secrets and not _machine_local(k, knobs)}
    out["RUN_NAME"] = cfg.run_name
    return dict(sorted(out.items()))


def file_sha256(path: Path) -> str | None:
    path = Path(path)
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def fingerprints(cfg: Config) -> dict[str, str | None]:
    """Content hashes that identify the model and data independently of where they live."""
    return {
        "hf_config_sha256": file_sha256(cfg.HF_MODEL / "config.json"),
        "train_tasks_sha256": file_sha256(cfg.TRAIN_TASKS),
        "val_tasks_sha256": file_sha256(cfg.VAL_TASKS),
    }


def _git_commit(root: Path) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def build(cfg: Config, rehearsal: bool = False) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "run_name": cfg.run_name,
        "rehearsal": rehearsal,
        "config": run_config(cfg),
        "fingerprints": fingerprints(cfg),
        "toolkit_commit": _git_commit(cfg.root),
        "host": platform.node(),
        # what the report and W&B show of the cluster, without reading knobs back by name
        "nodes": {"count": cfg.NNODES, "gpus_per_node": cfg.NUM_GPUS},
        "changes": [],
    }


def differences(recorded: dict, current: dict) -> tuple[list[str], list[str]]:
    """(refused, allowed) differences between a recorded manifest and the current one."""
    refused, allowed, locked = [], [], fixed()
    old, new = recorded.get("config", {}), current["config"]
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a == b:
            continue
        line = f"{name}: {a!r} -> {b!r}"
        (refused if name in locked else allowed).append(line)
    for name, a in recorded.get("fingerprints", {}).items():
        b = current["fingerprints"].get(name)
        if a and b and a != b:
            refused.append(f"{name.removesuffix('_sha256')} content changed ({a[:12]} -> {b[:12]})")
    return refused, allowed


def record_or_compare(cfg: Config, path: Path, rehearsal: bool = False) -> list[str]:
    """Create run.json on the first start; afterwards refuse dangerous changes and record the
    harmless ones. Returns the allowed changes (for the driver to log)."""
    current = build(cfg, rehearsal)
    if not Path(path).is_file():
        write_json_atomic(path, current)
        return []
    recorded = load_json(path)
    refused, allowed = differences(recorded, current)
    if refused:
        raise ToolkitError(
            "the configuration differs from the one this run was started with: " + "; ".join(refused), str(path),
            "restore those values (see run.json), or start a new run with another RUN_NAME")
    if allowed:
        recorded["config"] = current["config"]
        recorded["changes"] = recorded.get("changes", []) + [{"allowed": allowed}]
        write_json_atomic(path, recorded)
    return allowed


def as_recorded(cfg: Config, path: Path) -> Config:
    """This configuration with the run's own values from its run.json over it (`make resume` keeps
    them current): what a reader needs of the run itself -- its ROUNDS -- and not of the reader's
    configuration (a rehearsal profile's, another .env). Unchanged when there is no readable run.json."""
    recorded = (load_json_or_none(path) or {}).get("config")
    if not isinstance(recorded, dict):
        return cfg
    return replace(cfg, values={**cfg.values, **{k: str(v) for k, v in recorded.items()}})
