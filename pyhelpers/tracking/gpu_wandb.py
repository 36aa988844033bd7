"""Each finished round's GPU time in W&B: `round/gpu_idle_s`, `round/gpu_idle_frac` (and the busy
seconds, the wall time and each idle phase's seconds), one W&B run per round, logged once.

The figures come from events.jsonl alone (pyhelpers/run/gpu_time.py), so they can be logged any
time after the round ended: `pyhelpers run log-wandb` does it beside val/gate (overview/wandb_pending.py).
"""

from __future__ import annotations

from pathlib import Path

from pyhelpers.run import gpu_time
from pyhelpers.tracking import wandb_log


def metrics(rt: gpu_time.RoundTime) -> dict[str, float]:
    out = {"round/gpu_idle_s": round(rt.idle_s, 3), "round/gpu_idle_frac": round(rt.idle_frac, 4),
           "round/gpu_busy_s": round(rt.busy_s, 3), "round/wall_s": round(rt.wall_s, 3)}
    out.update({f"round/gpu_idle/{p}_s": round(rt.seconds[p], 3) for p in gpu_time.IDLE})
    return out


def log_rounds(rounds: list[gpu_time.RoundTime], *, project: str, group: str, run_dir: Path,
               mode: str | None) -> list[str]:
    """Log every finished round (gpu_time.split's) not logged yet; a line per round logged."""
    out = []
    for rt in rounds:
        if not rt.finished:
            continue
        rid = wandb_log.run_id(group, "gpu", f"r{rt.round}")
        figures = metrics(rt)
        done = wandb_log.log_once(project=project, group=group, job_type="round", run_dir=run_dir, rid=rid,
                                      name=f"gpu-r{rt.round}", config={"round": rt.round},
                                      log=lambda run, f=figures, r=rt.round: run.log(f, step=r), mode=mode)
        if done:
            out.append(f"W&B run {rid}: round {rt.round}'s GPU time (idle {figures['round/gpu_idle_s']:.0f} s, "
                       f"{100 * figures['round/gpu_idle_frac']:.1f}%)")
    return out
