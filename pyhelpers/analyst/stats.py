"""The analyst's counters: analyst/stats.json in the round dir and, with --wandb, a W&B run.

Counts of records, batches and proposals are derived from the candidate files (exact across
crashes); calls come from the spend counter (analyst/calls.json); errors by kind and latency are
carried over from the previous stats.json (best effort: a SIGKILL can lose the last few). The
W&B run has a deterministic id per round (``<run>-analyst-r000``, resume="allow"), and every
value logged is a cumulative total, so a restarted analyst logs the same totals again rather
than counting anything twice. stats.json holds durations only, no wall-clock times.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from pyhelpers.jsonfiles import write_json_atomic

log = logging.getLogger("pyhelpers.analyst")


class Stats:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.errors: dict[str, int] = {}
        self.latency = {"count": 0, "total_s": 0.0, "max_s": 0.0, "last_s": 0.0}
        self.proposals_dropped = 0
        self.values: dict = {}
        try:
            old = json.loads(self.path.read_text(encoding="utf-8"))
            self.errors = {str(k): int(v) for k, v in old.get("errors", {}).items()}
            self.latency.update({k: float(v) for k, v in old.get("latency", {}).items() if k in self.latency})
            self.latency["count"] = int(self.latency["count"])
            self.proposals_dropped = int(old.get("proposals_dropped", 0))
        except (FileNotFoundError, ValueError, TypeError, AttributeError):
            pass

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1

    def request_done(self, seconds: float) -> None:
        lat = self.latency
        lat["count"] += 1
        lat["total_s"] += seconds
        lat["max_s"] = max(lat["max_s"], seconds)
        lat["last_s"] = seconds

    def update(self, totals: dict[str, int], calls: int, max_calls: int, pending: int) -> dict:
        lat = self.latency
        self.values = {**totals, "records_pending": pending, "calls": calls, "max_calls": max_calls,
                       "proposals_dropped": self.proposals_dropped, "errors": dict(sorted(self.errors.items())),
                       "latency": {**lat, "mean_s": lat["total_s"] / lat["count"] if lat["count"] else 0.0}}
        return self.values

    def save(self) -> None:
        write_json_atomic(self.path, self.values)

    def metrics(self) -> dict[str, float]:
        """Flat `analyst/...` keys for W&B."""
        v = self.values
        out = {f"analyst/{k}": v[k] for k in ("records_processed", "records_pending", "records_quarantined",
                                               "batches_ok", "batches_rejected", "proposals",
                                               "proposals_dropped", "calls")}
        out["analyst/errors_total"] = sum(v["errors"].values())
        out.update({f"analyst/errors/{k}": n for k, n in v["errors"].items()})
        out["analyst/latency_mean_s"] = v["latency"]["mean_s"]
        out["analyst/latency_max_s"] = v["latency"]["max_s"]
        return out


@dataclass(frozen=True)
class WandbOptions:
    project: str
    group: str
    mode: str
    dir: Path
    run_id: str
    config: dict  # public settings only (no secrets)


class WandbLog:
    """A W&B run for the analyst's counters. Any failure of wandb is logged and switches W&B
    off: a tracking problem never stops the analyst."""

    def __init__(self, opts: WandbOptions):
        self.run = None
        try:
            import wandb  # lazy: only `--wandb` pays for the import

            opts.dir.mkdir(parents=True, exist_ok=True)
            self.run = wandb.init(project=opts.project, group=opts.group, job_type="analyst",
                                  id=opts.run_id, name=opts.run_id, resume="allow", dir=str(opts.dir),
                                  mode=opts.mode, config=opts.config,
                                  settings=wandb.Settings(console="off", silent=True))
        except Exception as exc:  # noqa: BLE001 - wandb can fail in many ways; none may stop us
            log.warning("W&B disabled for the analyst: %s: %s", type(exc).__name__, exc)

    def log(self, metrics: dict) -> None:
        if self.run is None:
            return
        try:
            self.run.log(metrics)
        except Exception as exc:  # noqa: BLE001
            log.warning("W&B log failed, disabling it: %s: %s", type(exc).__name__, exc)
            self.run = None

    def finish(self, exit_code: int) -> None:
        if self.run is None:
            return
        try:
            self.run.finish(exit_code=exit_code)
        except Exception as exc:  # noqa: BLE001
            log.warning("W&B finish failed: %s: %s", type(exc).__name__, exc)
