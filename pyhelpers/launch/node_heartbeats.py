"""The nodes of a multi-node run as the shared run dir records them (docs/multinode.md §5): each
worker's node.json (written by its agent), when the head's driver saw each heartbeat change (by one
machine's clock: the workers' clocks need not agree with the head's), and `make status`'s lines for
them. Read on any node; written only by the head's driver (seen.json) and the workers' agents."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from pyhelpers.jsonfiles import load_json_or_none, write_json_atomic
from pyhelpers.procs import procfs
from pyhelpers.run.layout import RunLayout

STALE = 10.0  # seconds without a heartbeat after which a worker is shown as gone
SEEN_NAME = "seen.json"  # beside a worker's node.json: when the head's driver saw its heartbeat change


def worker_records(lay: RunLayout) -> list[tuple[Path, dict]]:
    """Each worker's node.json in the shared run dir ({} where unreadable), by node address."""
    base = lay.run_dir / "nodes"
    return [(path, load_json_or_none(path) or {}) for path in (sorted(base.glob("*/node.json")) if base.is_dir() else [])]


def note_heartbeats(lay: RunLayout, now: float, here: str) -> None:
    """The head's driver, every few seconds: for each worker, when its heartbeat last changed, by this
    machine's clock (`here`: its hostname). The heartbeat is read as a value, never as a time: it is
    the worker's clock, which need not agree with this one."""
    for path, info in worker_records(lay):
        seen_path = path.with_name(SEEN_NAME)
        seen = load_json_or_none(seen_path) or {}
        same = seen.get("by") == here and seen.get("heartbeat") == info.get("heartbeat")
        write_json_atomic(seen_path, {"by": here, "heartbeat": info.get("heartbeat"),
                                      "changed": seen["changed"] if same else now, "looked": now})


def watch_heartbeats(lay: RunLayout, stopped: Callable[[float], bool], here: str, every: float = 2.0) -> None:
    """note_heartbeats until stopped(every) says so (the driver of a multi-node run, in a thread)."""
    while True:
        try:
            note_heartbeats(lay, time.time(), here)
        except OSError:  # a full disk or a lost mount: `make status` then shows the ages as unjudged or old
            pass
        if stopped(every):
            return


def heartbeat_age(info: dict, seen: dict, now: float, here: str) -> float | None:
    """Seconds since a worker's heartbeat last changed, on one machine's clock; None when no single
    clock tells: read on the worker's own machine, its heartbeat against this clock; read on the
    head, when the head's driver last saw it change (seen.json), while the driver looks."""
    if info.get("host") == here:
        return now - info.get("heartbeat", 0)
    if seen.get("by") != here:
        return None
    if seen.get("heartbeat") == info.get("heartbeat"):
        return now - seen["changed"]
    return 0.0 if now - seen.get("looked", 0) < STALE else None  # changed since the driver's last look


def node_rows(cfg, lay: RunLayout, now: float, here: str | None = None) -> list[dict]:
    """The run's nodes as the shared run dir records them, for `make status` on any node: the head
    (runs/<RUN>/nodes.json, written once its workers joined) and each worker's node.json with the
    age of its heartbeat (heartbeat_age; `here` is this machine's hostname). Read-only; [] for a run
    that never had a worker."""
    here = here or procfs.hostname()
    joined = load_json_or_none(lay.run_dir / "nodes.json") or {}
    workers = worker_records(lay)
    if not joined and not workers:
        return []
    head = joined.get("head") or {}
    rows = [{"role": "head", "addr": head.get("addr") or cfg.HEAD_ADDR or cfg.NODE_ADDR,
             "gpus": head.get("gpus"), "state": "head"}]
    for path, info in workers:
        age = heartbeat_age(info, load_json_or_none(path.with_name(SEEN_NAME)) or {}, now, here)
        state = (f"left (exit {info['exit']})" if "ended" in info else
                 "heartbeat not judged (another machine's clock: make status on the head while the run runs, "
                 "or on that worker)" if age is None else
                 f"no heartbeat for {age:.0f} s" if age >= STALE else
                 "its Ray node ended: waiting for the head's GCS to answer, then joining again" if "rejoining" in info
                 else _starting(info) if "ray_started" in info and info["ray_started"] is None else "up")
        note = (f"its node agent was killed and started again ({info['agent_restarts']} time(s))"
                if info.get("agent_restarts") and "ended" not in info else None)  # launch/node_keeper.py
        rows.append({"role": "worker", "addr": info.get("addr", path.parent.name), "gpus": info.get("gpus"),
                     "iface": info.get("iface"), "state": state, "note": note})
    return rows


def _starting(info: dict) -> str:
    """A worker whose agent started its Ray node and Ray has not said it started yet."""
    attempt = f"attempt {info.get('attempt')} of {info.get('attempts')}"
    if info.get("rejoins"):  # the agent's own start again after its node ended (launch/node_agent.py)
        return f"joining again: starting its Ray node ({attempt}, rejoin {info['rejoins']})"
    return f"starting its Ray node ({attempt})"


def node_lines(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    up = sum(1 for r in rows if r["state"] in ("head", "up"))
    out = [f"nodes: {up} of {len(rows)} up"]
    for r in rows:
        gpus = "?" if r["gpus"] is None else f"{r['gpus']:g}"
        out.append(f"  {r['role']:<6} {r['addr'] or '?':<16} {gpus} GPU(s)  {r['state']}"
                   + (f"; {r['note']}" if r.get("note") else ""))
    return out
