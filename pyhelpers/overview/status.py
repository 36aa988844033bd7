"""What `make status` and the end-of-run summary show, read from the run's own files, the
pidfiles and (when it answers) Ray's job API. Read-only: nothing is created or changed.

`gather()` returns one JSON-ready dict (`make status --json`); `render()` turns it into lines.
"""

from __future__ import annotations

import time
from pathlib import Path

from pyhelpers import stages
from pyhelpers.capacity import diskguard
from pyhelpers.capacity.diskplan import gb
from pyhelpers.config import ray_ports
from pyhelpers.config.load import Config
from pyhelpers.errors import ToolkitError
from pyhelpers.evaluate.results import results
from pyhelpers.jsonfiles import load_json_or_none
from pyhelpers.launch import node_heartbeats, ray_nodes, rayjob
from pyhelpers.overview import manifest
from pyhelpers.procs import groups, procfs
from pyhelpers.rollout.metrics import last_record, read_jsonl
from pyhelpers.run import checkpoints, events, gpu_time, hints, lock
from pyhelpers.run.layout import RunLayout
from pyhelpers.skills.bank import status_line
from pyhelpers.stages import eval_session, position, progress
from pyhelpers.stages.progress import duration, step_words

# Service -> the knob(s) of the address it serves on (for the status table).
PORTS = {"shopsim": ("SHOPSIM_HOST", "SHOPSIM_PORT"), "ray-head": (None, "RAY_DASHBOARD_PORT"),
         "eval-server": (None, "EVAL_PORT")}


def bank_line(bank: dict) -> str:
    return status_line(bank)


def summary_lines(cfg: Config, lay: RunLayout) -> list[str]:
    rounds = manifest.as_recorded(cfg, lay.manifest).ROUNDS
    out = [f"run {cfg.run_name}: {rounds} round(s) of {cfg.STEPS_PER_ROUND} steps"]
    out += [_result_line(row) for row in results(cfg, lay)]
    final = load_json_or_none(lay.final_bank)
    out.append(f"  final bank {lay.final_bank}: " + (bank_line(final) if final else "not written yet"))
    return out


def _result_line(row: dict) -> str:
    name = row["round"] if row["round"] == "baseline" else f"round {row['round']:03d}"
    return f"  {name:<10} " + "; ".join(x for x in (row["val"], row["gate"]) if x)


def _driver(lay: RunLayout, evs: list[dict]) -> dict:
    holder = lock.read_holder(lay.lock)
    running = lock.live_holder(lay.lock) is not None
    out = {"running": running, "pid": holder.get("pid") if holder else None,
           "since": holder.get("since") if holder else None, "host": holder.get("host") if holder else None}
    if lay.stopped_marker.is_file():
        out["stopped"] = lay.stopped_marker.read_text().strip()
    died = None if running else events.unfinished_stage(evs)
    if died:
        out["died_during"] = f"round {died.get('round')} {died.get('stage')}, started {died.get('at')}"
    return out


def _held(pgid: int) -> list[tuple[str, int]]:
    """(address, port) of each TCP socket a process of the group listens on, by port."""
    listening = procfs.listeners()
    inodes = {int(target[8:-1]) for pid in procfs.group_members(pgid) for _, target in procfs.open_fds(pid)
              if target.startswith("socket:[")}
    return sorted({listening[i] for i in inodes if i in listening}, key=lambda a: a[1])


def _services(cfg: Config, lay: RunLayout) -> list[dict]:
    """The recorded services; a live one's address is the one its processes listen on (the
    knob's port when they hold it), never what this shell's configuration says now: .env may
    have changed since the run started, and a rehearsal's shell is not the run's."""
    rows = []
    pgids = {r.name: r.pgid for r in groups.records(lay.pids)}
    for row in groups.status(lay.pids):
        _, port_knob = PORTS.get(row["name"], (None, None))
        if port_knob and row["state"] == "alive":
            held = _held(pgids[row["name"]])
            wanted = [a for a in held if str(a[1]) == cfg[port_knob]] or held  # else each port it holds
            if wanted:
                row["address"] = ", ".join(f"{addr}:{port}" for addr, port in wanted)
        row["log"] = str(Path(row["log"]).name)
        rows.append(row)
    return rows


def _job(lay: RunLayout, evs: list[dict]) -> dict | None:
    job = rayjob.recorded_job(lay.run_dir)
    if not job:
        return None
    ends = [e for e in evs if e.get("kind") in ("job-end", "job-end-unsupervised")
            and e.get("job_id") == job["submission_id"]]
    if ends:  # how it ended, as the driver (or make resume, for an orphan) saw it
        job["ended"] = ends[-1].get("status")
    try:
        info = rayjob.JobApi(job["dashboard_port"], lay.run_dir, timeout=2.0).info(job["submission_id"])
        job["status"] = info.get("status")
    except Exception:  # noqa: BLE001 - Ray down: the job cannot be running either
        job["status"] = None  # render: "not running (Ray is stopped)"
    return job


def _progress(lay: RunLayout, pos: dict, evs: list[dict], running: bool, rounds: int, wandb: bool) -> dict | None:
    """Round r of R (the run's R: manifest.as_recorded), the stage, step k/STEPS with the last
    step's figures (train) or the episodes the driver published (evaluate), and the ETA while a driver
    runs (stages/progress.py)."""
    r, stage = pos.get("round"), pos.get("stage")
    if stage is None or pos.get("error"):
        return None
    steps = lay.steps_per_round
    out: dict = {"round": r, "rounds": rounds, "stage": stage}
    if stages.get(stage).stepped and r is not None:
        recs = read_jsonl(lay.rollout_metrics(r))
        out.update(steps_done=len(recs), steps=steps)
        if recs:
            out["last_step"] = step_words(recs[max(recs)].get("metrics") or {})
    start = next((e["t"] for e in reversed(evs) if e.get("kind") == "stage-start" and e.get("stage") == stage), None)
    pub = progress.published(lay.run_dir)
    # a stage on the eval server (its log is the server's: eval_session) publishes its episodes
    if stages.get(stage).log == eval_session.SERVER_LOG and pub and start and pub.get("t", 0) >= start:
        out.update(episodes=pub.get("line"), episodes_age_s=round(time.time() - pub["t"]))
    if running:
        eta = progress.estimate(evs, stages.ROUND, rounds=rounds, steps=steps, r=-1 if r is None else r, stage=stage,
                                   steps_done=out.get("steps_done", 0), wandb=wandb)
        out.update(eta=eta.words(), eta_round_s=eta.round_s, eta_run_s=eta.run_s, step_s=eta.step_s)
    return out


def progress_line(p: dict, running: bool) -> str:
    where = (f"round {p['round']} ({p['round'] + 1} of {p['rounds']})" if p["round"] is not None
             else "before round 0")
    line = f"progress: {where} {p['stage']}"
    if "steps" in p:
        line += f", step {p['steps_done']}/{p['steps']} done"
        if p.get("last_step"):
            line += f" (last: {p['last_step']})"
        if p.get("step_s"):
            line += f", ~{duration(p['step_s'])} a step"
    if p.get("episodes"):
        line += f": {p['episodes']} ({p['episodes_age_s']} s ago)"
    return line + (f"; {p['eta']}" if running and p.get("eta") else "; no ETA: the driver is not running")


def _step(lay: RunLayout, r: int | None) -> dict | None:
    """The last rollout step the plugin finished in round r (rollout_metrics.jsonl)."""
    rec = last_record(lay.rollout_metrics(r)) if r is not None else None
    if rec is None:
        return None
    return {"rollout_id": rec.get("rollout_id"), "of": f"{r * lay.steps_per_round}..{lay.last_iteration(r)}",
            "success_rate": (rec.get("metrics") or {}).get("rollout/shopsim/success_rate")}


def _disk(cfg: Config, lay: RunLayout) -> dict:
    save = next(s for s in stages.ROUND if s.writes)  # the round's save: what the next one needs
    n = diskguard.need(cfg, lay, save.name, save.writes)
    return {"free_bytes": n.free, "next_save_needs_bytes": n.total, "ok": n.fits, "explain": n.explain()}


def _ray_head_up(st: dict) -> bool:
    return any(s["name"] == "ray-head" and s["state"] == "alive" for s in st["services"])


def _nodes(cfg: Config, lay: RunLayout, st: dict) -> dict:
    """A multi-node run's nodes as its Ray head lists them (docs/multinode.md), a lost one named with
    Ray's reason; the nodes' own records (node_heartbeats.node_rows) come first."""
    nnodes = cfg.NNODES
    if not _ray_head_up(st):
        return {"nnodes": nnodes, "nodes": None, "missing": [], "note": "the run's Ray head is not running"}
    try:
        nodes = ray_nodes.list_nodes(cfg.RAY_DASHBOARD_PORT, lay.run_dir, ray_ports.port_of(cfg, "raylet"))
    except Exception as exc:  # noqa: BLE001 - status shows what it can
        return {"nnodes": nnodes, "nodes": None, "missing": [], "note": f"Ray's state API did not answer ({exc})"}
    return {"nnodes": nnodes, "nodes": [n.__dict__ for n in nodes], "lines": [n.line() for n in nodes],
            "alive": sum(n.up for n in nodes), "missing": ray_nodes.missing(nodes, nnodes, cfg.NUM_GPUS)}


def _node_lines(nodes: dict) -> list[str]:
    if nodes["nodes"] is None:
        return [f"Ray's nodes: NNODES={nodes['nnodes']}; {nodes['note']}"]
    out = [f"Ray's nodes: {nodes['alive']} of {nodes['nnodes']} alive (NNODES={nodes['nnodes']})"]
    out += [f"  {line}" for line in nodes["lines"]]
    if nodes["missing"]:
        out.append(f"MISSING: {'; '.join(nodes['missing'])}: its agent joins it again on its own while it runs; "
                   "`make join` on a worker whose agent ended (a run that lost it waits JOIN_TIMEOUT for it, then resumes)")
    return out


def gather(cfg: Config, lay: RunLayout) -> dict:
    rounds = manifest.as_recorded(cfg, lay.manifest).ROUNDS
    try:
        pos = position.position(lay, rounds, cfg.BASELINE_VAL).as_dict()
    except ToolkitError as exc:
        pos = {"round": None, "stage": None, "detail": str(exc), "error": True}
    evs = events.read(lay.run_dir)
    driver = _driver(lay, evs)
    st = {
        "run": cfg.run_name, "run_dir": str(lay.run_dir), "save_dir": str(lay.save_dir),
        "exists": lay.manifest.is_file(), "rehearsal": bool((load_json_or_none(lay.manifest) or {}).get("rehearsal")),
        "driver": driver, "position": pos, "step": _step(lay, pos.get("round")),
        "progress": _progress(lay, pos=pos, evs=evs, running=driver["running"], rounds=rounds,
                              wandb=cfg.WANDB_MODE != "disabled"),
        "gpus": gpu_now(evs, time.time(), running=driver["running"]),
        "tracker": _tracker(lay), "hf": (checkpoints.hf_target(lay.hf_link).name if checkpoints.hf_target(lay.hf_link) else None),
        "services": _services(cfg, lay), "job": _job(lay, evs), "disk": _disk(cfg, lay),
        "results": results(cfg, lay), "nodes": node_heartbeats.node_rows(cfg, lay, time.time()),
        "restarts": [e for e in evs if e.get("kind") in ("service-restart", "run-restart", "service-gave-up",
                                                          "run-failed", "disk-low", "driver-lost",
                                                          "job-end-unsupervised", "node-removed")],
        "last_event": evs[-1] if evs else None, "logs": str(lay.logs),
        "report": str(lay.run_dir / "report" / "index.html") if (lay.run_dir / "report" / "index.html").is_file()
        else None,
    }
    if cfg.multinode:  # a one-node run's status stays as it was
        st["ray_nodes"] = _nodes(cfg, lay, st)
    return st


def gpu_now(evs: list[dict], now: float, running: bool) -> dict | None:
    """Which phase the GPUs are in now (run/gpu_time.py), and the current round's idle share so far."""
    got = gpu_time.phase_now(evs, stages.GPU_ROLES, now) if running else None
    if got is None:
        return None
    r, phase = got
    rt = gpu_time.split(evs, stages.GPU_ROLES, now=now)[-1]
    return {"round": r, "phase": phase, "busy": phase in gpu_time.BUSY, "round_idle_s": round(rt.idle_s, 1),
            "round_wall_s": round(rt.wall_s, 1)}


def gpu_line(g: dict | None) -> str:
    if g is None:
        return "GPUs: idle (no driver runs the job)"
    state = "busy" if g["busy"] else "IDLE"
    frac = g["round_idle_s"] / g["round_wall_s"] if g["round_wall_s"] else 0.0
    return (f"GPUs: {state} ({g['phase']}); round {g['round']} so far: idle {g['round_idle_s']:.0f} s of "
            f"{g['round_wall_s']:.0f} s ({100 * frac:.0f}%)")


def _tracker(lay: RunLayout) -> int | None:
    try:
        return checkpoints.read_tracker(lay.megatron)
    except ToolkitError:
        return None


ALIVE_JOB = ("PENDING", "RUNNING")


def orphans(st: dict) -> list[str]:
    """What still runs although no driver does: its services and its job."""
    if st["driver"]["running"]:
        return []
    names = [s["name"] for s in st["services"] if s["state"] == "alive"]
    if st["job"] and st["job"].get("status") in ALIVE_JOB:
        names.append(f"slime job {st['job']['submission_id']}")
    return names


def _process_lines(st: dict, running: bool) -> list[str]:
    out = ["services:" if st["services"] else "services: none running or recorded"]
    for s in st["services"]:
        age = f"{s['age_s']:.0f}s" if s["age_s"] is not None else "-"
        state = ("up" if running else "orphaned") if s["state"] == "alive" else s["state"]
        out.append(f"  {s['name']:<14} {state:<8} pid {s['pid']:<8} {s.get('address', ''):<21} up {age:>7}  "
                   f"logs/{s['log']}")
    job = st["job"]
    if job:
        status = job.get("status")
        if status is None:
            ended = (job.get("ended") or "").lower()
            words = f"{ended}; Ray is stopped" if ended else "not running (Ray's job API does not answer: Ray is stopped)"
        elif status in ALIVE_JOB and not running:
            words = f"{status}, orphaned (no driver watches it)"
        else:
            words = {"SUCCEEDED": "succeeded", "FAILED": "failed", "STOPPED": "stopped"}.get(status, status)
        out.append(f"  slime job      {words}  {job['submission_id']}")
    left = orphans(st)
    if left:
        out.append(f"ORPHANED: the driver is gone but {', '.join(left)} still run: `make resume` stops them "
                   "and continues the run (`make stop` only stops them)")
    return out


def render(st: dict) -> list[str]:
    """The status as lines; a rehearsal's hints name its own commands (run.hints)."""
    return [hints.for_run(st.get("rehearsal", False))(line) for line in _render(st)]


def _render(st: dict) -> list[str]:
    if not st["exists"]:
        return [f"run {st['run']}: not started ({st['run_dir']} has no run.json); start it with `make train`"]
    d, pos = st["driver"], st["position"]
    kind = " (rehearsal)" if st["rehearsal"] else ""
    out = [f"run {st['run']}{kind}: state {st['run_dir']}, weights {st['save_dir']}"]
    if d["running"]:
        out.append(f"driver: running, pid {d['pid']} on {d['host']} since {d['since']}")
    else:
        line = "driver: not running" + (f" ({d['stopped']})" if d.get("stopped") else "")
        if d.get("died_during"):
            line += f"; it died (killed?) during {d['died_during']}"
        out.append(line + ("; continue with `make resume`" if pos.get("stage") else ""))
    if pos.get("error"):
        out.append(f"position: cannot tell: {pos['detail']}")
    elif pos.get("stage") is None:
        out.append(f"position: finished ({pos['detail']})")
    else:
        out.append(f"position: round {pos['round']}, stage {pos['stage']} ({pos['detail']})")
    if st.get("progress"):
        out.append(progress_line(st["progress"], d["running"]))
    if pos.get("stage") is not None:
        out.append(gpu_line(st.get("gpus")))
    tracker = st["tracker"]
    out.append("checkpoint: " + ("none saved yet" if tracker is None else f"tracker at iteration {tracker}")
               + f"; hf -> {st['hf'] or 'none'}")
    out += _process_lines(st, d["running"])
    out += node_heartbeats.node_lines(st.get("nodes") or [])
    if st.get("ray_nodes"):
        out += _node_lines(st["ray_nodes"])
    disk = st["disk"]
    out.append(f"disk: {gb(disk['free_bytes'])} free; the next save needs {gb(disk['next_save_needs_bytes'])} "
               f"({'ok' if disk['ok'] else 'SHORT: free space before the next round'})")
    out += [_result_line(row) for row in st["results"]]
    for e in st["restarts"][-5:]:
        what = {"run-failed": "stopped:", "disk-low": "warning:", "driver-lost": "killed:",
                "job-end-unsupervised": "note:", "node-removed": "removed:"}.get(e.get("kind"), "restart:")
        detail = e.get("reason") or e.get("detail") or " ".join(str(e[k]) for k in ("cause", "excerpt") if e.get(k))
        if e.get("kind") == "disk-low":
            detail = f"free {gb(e['free'])} < {gb(e['need'])} needed by the round's save"
        where = "" if e.get("round") is None and e.get("node") else f" round {e.get('round')}"  # (a node's removal)
        out.append(f"{what} {e.get('at')} {e.get('kind')}{where} "
                   f"{e.get('service') or e.get('stage') or e.get('node') or ''} {detail}".rstrip())
    if st["last_event"]:
        e = st["last_event"]
        out.append(f"last event: {e.get('at')} {e.get('kind')} "
                   + " ".join(f"{k}={e[k]}" for k in ("round", "stage", "service", "status") if k in e))
    out.append(f"logs: {st['logs']} (make logs SERVICE=<name>)")
    if st["report"]:
        out.append(f"report: {st['report']}")
    return out
