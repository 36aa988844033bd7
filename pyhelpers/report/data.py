"""The report's tables, read from the run's own files only (no network, no W&B service):

| table    | one row per          | from                                                          |
|----------|----------------------|---------------------------------------------------------------|
| val      | round (and baseline) | rounds/round-NNN/val/summary.json (Wilson / mean CIs)         |
| gate     | round x tested skill | rounds/round-NNN/gate/summary.json (decisions, CIs, MDE)      |
| bank     | round                | rounds/round-NNN/skillbank.json (injected), skillbank-final   |
| steps    | training step        | rounds/round-NNN/rollout_metrics.jsonl (the plugin's figures) |
| train    | optimizer step       | slime's offline W&B runs (train/*), when there are any        |
| timeline | stage run            | events.jsonl (stage-start / stage-end)                        |
| restarts | restart, failure, kill | events.jsonl (run-restart, service-restart, run-failed, driver-lost) |
| gpu      | round                | events.jsonl: wall time split into GPU-busy and idle phases (run/gpu_time.py) |

A round the run did not finish (crashed mid-round, or not reached yet) has rows marked
`missing` (val, bank) or none (gate, steps), and a note saying what is missing.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from pyhelpers import stages
from pyhelpers.config.load import Config
from pyhelpers.jsonfiles import load_json_or_none, write_bytes_atomic
from pyhelpers.rollout.metrics import read_jsonl
from pyhelpers.run import events, gpu_time, lock
from pyhelpers.run.layout import RunLayout
from pyhelpers.tracking import wandb_read

STATUSES = ("active", "probation", "candidate", "retired", "rejected", "merged")
OUR_WANDB_RUNS = ("-val-", "-gate-", "-analyst-")  # the toolkit's own; the others are slime's
REPORT_CACHE = ".report-cache"  # in the run dir (not in report/, which a user copies away)

STAGES = {s.name: s for s in stages.ALL}  # the registry: each stage's colour and label, in run order
BASELINE = stages.BASELINE.name


@dataclass
class Tables:
    rounds: int
    val: list[dict] = field(default_factory=list)
    gate: list[dict] = field(default_factory=list)
    bank: list[dict] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)
    train: list[dict] = field(default_factory=list)
    timeline: list[dict] = field(default_factory=list)
    restarts: list[dict] = field(default_factory=list)
    gpu: list[dict] = field(default_factory=list)  # gpu_time.RoundTime.row() per round started
    gpu_idle_frac: float | None = None  # idle / wall over the finished rounds (None: none finished)
    notes: list[str] = field(default_factory=list)
    nodes: int = 1          # NNODES the run recorded in run.json (its configuration when it started)
    gpus_per_node: int = 0  # NUM_GPUS, likewise
    rehearsal: bool = False  # run.json says so: stand-ins on the CPU, no GPU behind NUM_GPUS


# Each CSV's columns, in order, written as its header even when it has no row (a row may add
# keys: train has one train/* column per figure slime logged).
COLUMNS = {
    "val": ("round", "status", "n", "success", "success_low", "success_high", "strict", "strict_low", "strict_high",
            "loose", "loose_low", "loose_high"),
    "gate": ("round", "skill", "title", "estimate", "ci_low", "ci_high", "decision", "mde"),
    "bank": ("round", "status", *STATUSES, "active_tokens"),
    "steps": ("round", "step", "reward", "success", "retry_rate", "turns", "episodes"),
    "train": ("step",),
    "timeline": ("round", "stage", "start", "start_t", "end_t", "seconds", "status"),
    "restarts": ("at", "t", "kind", "round", "stage", "cause", "detail"),
    "gpu": gpu_time.ROW_COLUMNS,
}


def _val_row(label, summary: dict | None) -> dict:
    if summary is None:
        return {"round": label, "status": "missing"}
    s, st, lo = summary["success"], summary["strict"], summary["loose"]
    return {"round": label, "status": "ok", "n": summary["n"], "success": s["rate"], "success_low": s["ci_low"],
            "success_high": s["ci_high"], "strict": st["mean"], "strict_low": st["ci_low"], "strict_high": st["ci_high"],
            "loose": lo["mean"], "loose_low": lo["ci_low"], "loose_high": lo["ci_high"]}


def _bank_row(label, bank: dict | None) -> dict:
    if bank is None:
        return {"round": label, "status": "missing"}
    row = {"round": label, "status": "ok", **{s: 0 for s in STATUSES}, "active_tokens": 0}
    for skill in bank.get("skills", []):
        row[skill["status"]] = row.get(skill["status"], 0) + 1
        if skill["status"] == "active":
            row["active_tokens"] += int((skill.get("render") or {}).get("tokens") or 0)
    return row


def _steps(lay: RunLayout, r: int) -> list[dict]:
    """One row per step; a step slime replayed after a resume counts once (its last line)."""
    rows = []
    for _, rec in sorted(read_jsonl(lay.rollout_metrics(r)).items()):
        m = rec.get("metrics", {})
        rows.append({"round": r, "step": rec["rollout_id"], "reward": m.get("rollout/shopsim/reward_mean"),
                     "success": m.get("rollout/shopsim/success_rate"), "retry_rate": m.get("rollout/shopsim/retry_rate"),
                     "turns": m.get("rollout/shopsim/turns_mean"), "episodes": m.get("rollout/shopsim/episodes")})
    return rows


def _wandb_stamp(run_dir: Path) -> list | None:
    """What a W&B offline run's history depends on: its .wandb files' names, sizes and mtimes (W&B
    only appends to them) and wandb's version (it parses them). None when there is no .wandb file."""
    files = sorted((p.name, st.st_size, st.st_mtime_ns) for p in run_dir.glob("*.wandb") for st in [p.stat()])
    if not files:
        return None
    try:
        version = metadata.version("wandb")
    except metadata.PackageNotFoundError:
        version = ""
    return [version, *[list(f) for f in files]]


def _wandb_history(run_dir: Path, cache_dir: Path | None = None) -> list[dict]:
    """The history items of one offline run, from W&B's reader (tracking/wandb_read), or from
    cache_dir when the run's files have not changed since (a finished job's run never changes, and
    the report is written after every round). The stamp is taken before inspecting, so a run still
    being written is inspected again next time."""
    stamp = _wandb_stamp(run_dir)
    cached = cache_dir / f"{run_dir.name}.json" if cache_dir is not None and stamp is not None else None
    if cached is not None:
        hit = load_json_or_none(cached)
        if isinstance(hit, dict) and hit.get("stamp") == stamp and isinstance(hit.get("items"), list):
            return hit["items"]
    argv = wandb_read.inspect_argv(run_dir)
    if argv is None:
        return []
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, env={**os.environ, "WANDB_SILENT": "true"})
    items = []
    for line in out.stdout.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("type") == "history":
            items.append(rec["history"]["item"])
    if cached is not None and out.returncode == 0:
        write_bytes_atomic(cached, json.dumps({"stamp": stamp, "items": items}).encode("utf-8"))
    return items


def _train(lay: RunLayout) -> list[dict]:
    """train/* per optimizer step from slime's offline W&B runs (one per round's job)."""
    dirs = [d for d in sorted(lay.wandb_offline_runs.glob("offline-run-*"))
            if d.is_dir() and not any(tag in d.name for tag in OUR_WANDB_RUNS)]
    if not dirs:
        return []
    cache = lay.run_dir / REPORT_CACHE / "wandb"
    with ThreadPoolExecutor(max_workers=4) as pool:
        histories = list(pool.map(lambda d: _wandb_history(d, cache), dirs))
    rows = {}
    for items in histories:
        for item in items:
            if "train/step" in item:
                step = int(item["train/step"])
                rows[step] = {"step": step, **{k: v for k, v in item.items() if k.startswith("train/")
                                               and k != "train/step" and isinstance(v, (int, float))}}
    return [rows[k] for k in sorted(rows)]


RESTART_KINDS = ("run-restart", "service-restart", "run-failed", "driver-lost", "job-end-unsupervised")


def _timeline(evs: list[dict], driver_alive: bool = False) -> tuple[list[dict], list[dict]]:
    """Stage runs, and the restarts and failures. A stage that started and never ended was cut
    short by the driver's death (kill -9, OOM, a reboot): `killed` when a later driver went on (its
    `driver-lost` event) or no driver runs now, `running` while one does."""
    rows, open_ = [], {}

    def close_open(status: str) -> None:
        for (r, stage), start in open_.items():
            rows.append({"round": r, "stage": stage, "start": start["at"], "start_t": start["t"], "end_t": None,
                         "seconds": None, "status": status})
        open_.clear()

    for e in evs:
        key = (e.get("round"), e.get("stage"))
        if e["kind"] == "driver-lost":
            close_open("killed")
        elif e["kind"] == "stage-start":
            open_[key] = e
        elif e["kind"] == "stage-end" and key in open_:
            start = open_.pop(key)
            rows.append({"round": key[0], "stage": key[1], "start": start["at"], "start_t": start["t"],
                         "end_t": e["t"], "seconds": round(e["t"] - start["t"], 3), "status": e.get("status")})
    restarts = [{"at": e["at"], "t": e["t"], "kind": e["kind"], "round": e.get("round"),
                 "stage": e.get("stage") or e.get("service"), "cause": e.get("cause", ""),
                 "detail": e.get("excerpt") or e.get("reason") or e.get("log_tail") or e.get("detail") or ""}
                for e in evs if e["kind"] in RESTART_KINDS]
    if open_ and not driver_alive:  # killed, and no driver has gone on yet
        for (r, stage), start in open_.items():
            last = max((x["t"] for x in evs if x["t"] >= start["t"]), default=start["t"])
            restarts.append({"at": start["at"], "t": last, "kind": "driver-lost", "round": r, "stage": stage,
                             "cause": "killed", "detail": f"the driver died during {stage}; nothing has "
                                                          "continued the run since (make resume does)"})
    close_open("killed" if not driver_alive else "running")
    return rows, restarts


def gather(cfg: Config, lay: RunLayout) -> Tables:
    rounds = cfg.ROUNDS
    t = Tables(rounds)
    manifest = load_json_or_none(lay.manifest) or {}
    recorded = manifest.get("nodes") or {}  # run.json before it: this config
    t.rehearsal = bool(manifest.get("rehearsal"))
    t.nodes = int(recorded.get("count") or cfg.NNODES)
    t.gpus_per_node = int(recorded.get("gpus_per_node") or cfg.NUM_GPUS)
    base = load_json_or_none(lay.baseline_val_summary)
    if base:
        t.val.append(_val_row(BASELINE, base))
    for r in range(rounds):
        val, gate = load_json_or_none(lay.val_summary(r)), load_json_or_none(lay.gate_summary(r))
        t.val.append(_val_row(r, val))
        t.bank.append(_bank_row(r, load_json_or_none(lay.bank_in(r))))
        steps = _steps(lay, r)
        t.steps += steps
        missing = [what for what, ok in (("training steps", steps), ("val", val), ("gate", gate)) if not ok]
        if missing:
            t.notes.append(f"round {r}: no {', no '.join(missing)} yet (the run crashed in this round or has not "
                           "reached it)")
        if gate:
            titles = {s["id"]: s["title"] for s in (load_json_or_none(lay.compiled(r)) or {}).get("skills", [])}
            for skill, d in sorted(gate["decisions"].get("decisions", {}).items()):
                t.gate.append({"round": r, "skill": skill, "title": titles.get(skill, ""), "estimate": d.get("estimate"),
                               "ci_low": d.get("ci_low"), "ci_high": d.get("ci_high"), "decision": d.get("decision"),
                               "mde": gate.get("mde")})
    final = load_json_or_none(lay.final_bank)
    t.bank.append(_bank_row("final", final))
    t.train = _train(lay)
    evs = events.read(lay.run_dir)
    t.timeline, t.restarts = _timeline(evs, lock.live_holder(lay.lock) is not None)
    t.gpu, t.gpu_idle_frac = gpu_rows(evs)
    return t


def gpu_rows(evs: list[dict]) -> tuple[list[dict], float | None]:
    """Each round's GPU-busy/idle split, and the run's idle fraction over its finished rounds."""
    rounds = gpu_time.split(evs, stages.GPU_ROLES)
    done = [x for x in rounds if x.finished]
    return [x.row() for x in rounds], (round(gpu_time.run_idle_frac(done), 4) if done else None)


def write_csv(path: Path, rows: list[dict], columns: tuple[str, ...] = ()) -> Path:
    """rows as CSV under `columns`, then every other key that occurs, in first-seen order; the
    header alone when there is no row. Written to a temp name, then renamed."""
    cols: list[str] = list(columns)
    for row in rows:
        cols += [k for k in row if k not in cols]
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=cols)
    w.writeheader()
    w.writerows(rows)
    write_bytes_atomic(path, buf.getvalue().encode("utf-8"))
    return path

