"""Bare val's W&B figures: one run per val directory, job_type=val, group=WANDB_GROUP, logged once.

Run id `<group>-val-r<round>` (baseline: `<group>-val-baseline`), step = round (baseline: 0), so
the val runs of a group line up with the gate runs by round. `wandb_logging.log_once` writes the
marker `<run_dir>/wandb/logged/<id>.json` after a clean finish; a resumed `eval val --wandb`
finds it and logs nothing. Metric names are listed in docs/training_monitoring.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pyhelpers.tracking import wandb_log


def val_metrics(summary: Mapping) -> dict:
    s, st, lo = summary["success"], summary["strict"], summary["loose"]
    m = {"val/n": summary["n"], "val/episodes": summary["episodes"], "val/infra_errors": summary["infra_errors"],
         "val/retried": summary["retried"], "val/turns_mean": summary["turns_mean"],
         "val/success_rate": s["rate"], "val/success_ci_low": s["ci_low"], "val/success_ci_high": s["ci_high"],
         "val/strict_mean": st["mean"], "val/strict_ci_low": st["ci_low"], "val/strict_ci_high": st["ci_high"],
         "val/loose_mean": lo["mean"], "val/loose_ci_low": lo["ci_low"], "val/loose_ci_high": lo["ci_high"]}
    m.update({f"val/termination/{k}": v for k, v in summary["terminations"].items()})
    return {k: v for k, v in m.items() if v is not None}


def log_val(summary: Mapping, *, project: str, group: str, run_dir: Path, mode: str | None = None) -> dict:
    """Log one val summary once. Returns {run_id, logged, marker}."""
    rnd = summary.get("round")
    tag = f"r{rnd}" if rnd is not None else summary.get("label") or "baseline"
    rid = wandb_log.run_id(group, "val", tag)
    config = {"round": rnd, "label": summary.get("label"), "prompt_version": summary.get("prompt_version"),
              "tasks": summary.get("tasks"), **{f"eval_{k}": v for k, v in (summary.get("settings") or {}).items()}}
    metrics = val_metrics(summary)

    def log(run) -> None:
        run.log(metrics, step=int(rnd or 0))
        run.summary["val/label"] = summary.get("label") or ""

    done = wandb_log.log_once(project=project, group=group, job_type="val", run_dir=run_dir, rid=rid,
                                  name=f"val-{tag}", config=config, log=log, mode=mode)
    return {"run_id": rid, "logged": done, "marker": str(wandb_log.marker_path(run_dir, rid))}
