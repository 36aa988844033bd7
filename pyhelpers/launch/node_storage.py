"""Shared storage of a multi-node run, checked by content (docs/multinode.md §6).

A path that exists on every node proves nothing (each may be a local disk). The head writes a fresh
random nonce into TRAIN_SAVE/<RUN> and the run dir and hashes the read-only inputs (`record`), and
stores that record in its Ray's GCS beside its versions (launch/cluster.py `publish`). Two readers:
- a worker's `make join`, before its node enters the cluster (`problems_here`): the same directories,
  the head's nonces read back there, both writable, the inputs' bytes the same;
- the head at each round's start, through a Ray task pinned to each joined node (`problems_seen`,
  launch/node_probe.py storage): a mount can go away while the run goes on.
Each problem is one ToolkitError naming the node, the path and the fix.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

from pyhelpers.errors import ToolkitError
from pyhelpers.run.layout import RunLayout

NONCE_NAME = ".node-check"  # under TRAIN_SAVE/<RUN> and the run dir
STORAGE_KEY = "storage"  # the record's key in the head's GCS (namespace shopsimrl, beside the versions)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_only_inputs(cfg) -> list[Path]:
    """HF_MODEL's index and config and the task files: what every node must read the same bytes of."""
    model = cfg.HF_MODEL
    out = sorted(model.glob("*.index.json")) + [model / "config.json"]
    out += [cfg.path(k) for k in ("TRAIN_TASKS", "VAL_TASKS") if cfg.get(k)]
    return [p for p in out if p.is_file()]


def shared_dirs(cfg, lay: RunLayout) -> dict[str, Path]:
    """The directories every node must see as the head's, by the knob that places them."""
    return {"TRAIN_SAVE": cfg.save_dir, "RUNS_DIR": lay.run_dir}


def record(cfg, lay: RunLayout) -> dict:
    """A fresh nonce written into each shared directory (whole before it is visible) and the inputs'
    hashes: {"dirs": {knob: {"dir", "nonce"}}, "hashes": {path: sha256}}."""
    out: dict = {"dirs": {}, "hashes": {str(p): sha256(p) for p in read_only_inputs(cfg)}}
    for knob, root in shared_dirs(cfg, lay).items():
        root.mkdir(parents=True, exist_ok=True)
        value = secrets.token_hex(16)
        path = root / NONCE_NAME
        tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
        tmp.write_text(value)
        os.replace(tmp, path)
        out["dirs"][knob] = {"dir": str(root), "nonce": value}
    return out


def nonce_paths(rec: dict) -> dict[str, tuple[str, str]]:
    """Each nonce file's path -> (its knob, the nonce the head wrote there)."""
    return {str(Path(d["dir"]) / NONCE_NAME): (knob, d["nonce"]) for knob, d in rec["dirs"].items()}


def shown(got: str | None) -> str:
    if got is None:
        return "nothing"
    return got if got.startswith("unreadable") else f"{got[:12]}…"


def _attempt(fn, path: str) -> str:
    try:
        return fn(path)
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"


def problems_here(cfg, lay: RunLayout, rec: dict) -> list[ToolkitError]:
    """What this worker sees against the head's record, before it joins: [] when it shares the
    head's storage."""
    out = []
    mine = shared_dirs(cfg, lay)
    for knob, want in rec["dirs"].items():
        here = mine[knob]
        if str(here) != want["dir"]:
            out.append(ToolkitError(f"this worker's {knob} directory is {here}, the head's {want['dir']}", knob,
                                    f"set {knob} here as on the head (the same shared directory at the same path), "
                                    "then `make join`"))
            continue
        path = here / NONCE_NAME
        got = _attempt(lambda p: Path(p).read_text(), str(path))
        if got != want["nonce"]:
            out.append(ToolkitError(f"this worker does not share {knob}: it reads {path} as {shown(got)}, not the "
                                    "nonce the head wrote", str(path),
                                    f"mount the head's {knob} at the same path here (NFS or similar, writable), "
                                    "then `make join`"))
            continue
        probe = here / f"{NONCE_NAME}-{cfg.NODE_ADDR}"
        try:  # slime's ranks on this node write their checkpoint shards and records there
            probe.write_text("")
            probe.unlink()
        except OSError as exc:
            out.append(ToolkitError(f"this worker cannot write to {knob} ({here}): {exc.strerror or exc}", str(here),
                                    f"mount the head's {knob} writable here, then `make join`"))
    for path, value in rec["hashes"].items():
        got = _attempt(sha256, path)
        if got != value:
            out.append(ToolkitError(f"this worker reads different bytes at {path} ({shown(got)} against the head's "
                                    f"sha256 {value[:12]}…)", path,
                                    "give this node the head's file at the same path (a shared mount or a copy), "
                                    "then `make join`"))
    return out


def problems_seen(cfg, rec: dict, node: str, got: dict) -> list[ToolkitError]:
    """What a task pinned to `node` read there (node_probe storage) against the head's record."""
    out = []
    for path, (knob, value) in nonce_paths(rec).items():
        if got["nonces"].get(path) != value:
            out.append(ToolkitError(f"node {node} does not share {knob}: it reads {path} as "
                                    f"{shown(got['nonces'].get(path))}, not the nonce the head just wrote", path,
                                    f"mount the head's {knob} ({cfg.path(knob)}) at the same path on {node} "
                                    "(NFS or similar, writable), then `make join` there"))
    for path, value in rec["hashes"].items():
        if got["hashes"].get(path) != value:
            out.append(ToolkitError(f"node {node} reads different bytes at {path} "
                                    f"({shown(got['hashes'].get(path))} against the head's sha256 {value[:12]}…)",
                                    path, f"give {node} the head's file at the same path (a shared mount or a copy), "
                                    "then `make join` there"))
    return out
