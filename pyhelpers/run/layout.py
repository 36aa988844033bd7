"""Where a run's files live (architecture §4), in one place.

State lives in RUNS_DIR/<RUN_NAME>/ and weights in TRAIN_SAVE/<RUN_NAME>/. Everything the toolkit
writes into a run's files is relative to one of these two roots, so a run can move machines.
Round numbers are 0-based; slime's iteration number is the 0-based rollout id.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunLayout:
    run_dir: Path
    save_dir: Path
    steps_per_round: int

    # --- run state -------------------------------------------------------------------------
    @property
    def manifest(self) -> Path:
        return self.run_dir / "run.json"

    @property
    def lock(self) -> Path:
        return self.run_dir / "lock"

    @property
    def pids(self) -> Path:
        return self.run_dir / "pids"

    @property
    def logs(self) -> Path:
        return self.run_dir / "logs"

    @property
    def wandb_dir(self) -> Path:
        return self.run_dir / "wandb"

    @property
    def final_bank(self) -> Path:
        return self.run_dir / "skillbank-final.json"

    @property
    def baseline_dir(self) -> Path:
        return self.run_dir / "baseline"

    @property
    def baseline_val_summary(self) -> Path:
        return self.baseline_dir / "val" / "summary.json"

    @property
    def stopped_marker(self) -> Path:
        """Written by `make stop`: a stop is final; the driver must not start anything new."""
        return self.run_dir / "stopped"

    @property
    def migrating_marker(self) -> Path:
        """Present while `make migrate-machine` has not verified every file: nothing resumes."""
        return self.run_dir / "MIGRATING"

    def round_dir(self, r: int) -> Path:
        return self.run_dir / "rounds" / f"round-{r:03d}"

    def bank_in(self, r: int) -> Path:
        """The bank injected into round r."""
        return self.round_dir(r) / "skillbank.json"

    def bank_out(self, r: int, rounds: int) -> Path:
        """The artifact whose existence means round r's inject is done."""
        return self.final_bank if r == rounds - 1 else self.bank_in(r + 1)

    def stage_record(self, r: int, stage: str) -> Path:
        return self.round_dir(r) / "stages" / f"{stage}.done"

    def plugin_config(self, r: int) -> Path:
        return self.round_dir(r) / "slime.yaml"

    def started_marker(self, r: int) -> Path:
        """Written by the rollout plugin at the job's first step: the job has its GPUs."""
        return self.round_dir(r) / "plugin.started"

    def rollout_metrics(self, r: int) -> Path:
        """The rollout plugin's per-step metrics of round r (rollout/metrics.py)."""
        return self.round_dir(r) / "rollout_metrics.jsonl"

    def spool(self, r: int) -> Path:
        """The rollout plugin's failure records of round r, for the analyst."""
        return self.round_dir(r) / "spool"

    def candidates(self, r: int) -> Path:
        """The analyst's candidate skills of round r, for compile."""
        return self.round_dir(r) / "candidates"

    def compiled(self, r: int) -> Path:
        return self.round_dir(r) / "compiled.json"

    def val_dir(self, r: int) -> Path:
        return self.round_dir(r) / "val"

    def val_summary(self, r: int) -> Path:
        return self.val_dir(r) / "summary.json"

    def gate_dir(self, r: int) -> Path:
        return self.round_dir(r) / "gate"

    def gate_summary(self, r: int) -> Path:
        return self.gate_dir(r) / "summary.json"

    def gate_decisions(self, r: int) -> Path:
        return self.gate_dir(r) / "decisions.json"

    # --- weights ---------------------------------------------------------------------------
    @property
    def megatron(self) -> Path:
        return self.save_dir / "megatron"

    @property
    def hf_link(self) -> Path:
        return self.save_dir / "hf"

    def hf_dir(self, iteration: int) -> Path:
        return self.save_dir / f"hf-{iteration:07d}"

    def hf_staging(self, iteration: int) -> Path:
        """Where the converter writes hf-<iteration> before the rename."""
        return self.save_dir / f".hf-{iteration:07d}.partial"

    def last_iteration(self, r: int) -> int:
        """slime's iteration (0-based rollout id) of round r's final save."""
        return (r + 1) * self.steps_per_round - 1

    def num_rollout(self, r: int) -> int:
        """slime --num-rollout for round r: it trains rollouts [r*S, (r+1)*S)."""
        return (r + 1) * self.steps_per_round

    def round_of_iteration(self, iteration: int) -> int:
        return iteration // self.steps_per_round


def from_config(cfg) -> RunLayout:
    return RunLayout(cfg.run_dir, cfg.save_dir, cfg.int("STEPS_PER_ROUND"))
