"""`pyhelpers run log-wandb`: whatever the run has not logged to W&B yet, once (architecture §8).

The figures come from the files the stages wrote (val/gate summary.json, gate decisions, the
analyst's stats.json), so logging can wait: it runs in the background after each evaluation (off
the round transition's critical path) and once more, in the foreground, when the run ends. Each
W&B run is logged once (markers in RUN_DIR/wandb/logged, pyhelpers/tracking/wandb_log.py); a second
logger started meanwhile waits for the first (a flock), then finds nothing left to do.
"""

from __future__ import annotations

import fcntl
import json
import os

from pyhelpers import stages
from pyhelpers.analyst.stats import Stats
from pyhelpers.config.load import Config
from pyhelpers.evaluate import round
from pyhelpers.run import events, gpu_time
from pyhelpers.run.layout import RunLayout, wandb_markers
from pyhelpers.tracking import gpu_wandb, wandb_log


def _analyst_final(cfg: Config, lay: RunLayout, r: int) -> str | None:
    """The analyst's final counters of round r (after its drain) into its W&B run, once."""
    stats_path = lay.round_dir(r) / "analyst" / "stats.json"
    if not stats_path.is_file():
        return None

    stats = Stats(stats_path)
    stats.values = json.loads(stats_path.read_text(encoding="utf-8"))
    rid = wandb_log.run_id(cfg.run_name, "analyst", f"r{r:03d}")
    done = wandb_log.log_once(project=cfg.WANDB_PROJECT, group=cfg.WANDB_GROUP, job_type="analyst",
                                  run_dir=cfg.run_dir, rid=rid, name=rid, config={"round": r},
                                  log=lambda run: run.log(stats.metrics()), mode=cfg.WANDB_MODE or None)
    return f"W&B run {rid}: " + ("logged the final counters" if done else "already logged, nothing sent")


def log_all(cfg: Config, lay: RunLayout) -> list[str]:
    if cfg.WANDB_MODE == "disabled":
        return ["W&B disabled (WANDB_MODE=disabled): nothing logged"]

    lock_dir = wandb_markers(lay.run_dir)
    lock_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        out = []
        if lay.baseline_val_summary.is_file():
            out.append(round.log_val_wandb(cfg, lay.baseline_val_dir))
        for r in range(cfg.ROUNDS):
            if lay.val_summary(r).is_file():
                out.append(round.log_val_wandb(cfg, lay.val_dir(r)))
            if lay.gate_summary(r).is_file() and lay.gate_decisions(r).is_file():
                out.append(round.log_gate_wandb(cfg, lay.round_dir(r)))
            if lay.compiled(r).is_file():  # the analyst's drain is over once the round compiled
                line = _analyst_final(cfg, lay, r)
                if line:
                    out.append(line)
        out += gpu_wandb.log_rounds(gpu_time.split(events.read(lay.run_dir), stages.GPU_ROLES),
                                    project=cfg.WANDB_PROJECT, group=cfg.WANDB_GROUP, run_dir=cfg.run_dir,
                                    mode=cfg.WANDB_MODE or None)
        return out
    finally:
        os.close(fd)
