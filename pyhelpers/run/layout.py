"""Where a run's files live (architecture §4), in one place.

State lives in RUNS_DIR/<RUN_NAME>/ and weights in TRAIN_SAVE/<RUN_NAME>/. Everything the toolkit
writes into a run's files is relative to one of these two roots, so a run can move machines.
Round numbers are 0-based; slime's iteration number is the 0-based rollout id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SUMMARY = "summary.json"  # in a val/ or gate/ dir (the baseline's val/ too)


def summary(d: Path) -> Path:
    """The summary.json of a val/ or gate/ dir."""
    return Path(d) / SUMMARY


# Paths that code holding only RUNS_DIR/<RUN>/ needs (W&B logging, the Ray job record, Ray's token).
def wandb_dir(run_dir: Path) -> Path:
    """WANDB_DIR of the run (W&B itself writes wandb/ under it: wandb_runs_dir)."""
    return Path(run_dir) / "wandb"


def wandb_runs_dir(run_dir: Path) -> Path:
    """Where W&B writes its offline-run-* dirs."""
    return wandb_dir(run_dir) / "wandb"


def wandb_markers(run_dir: Path) -> Path:
    """One marker per W&B run logged from the run's files (wandb_marker)."""
    return wandb_dir(run_dir) / "logged"


def wandb_marker(run_dir: Path, rid: str) -> Path:
    """Written once W&B run `rid` is logged: it is never logged twice."""
    return wandb_markers(run_dir) / f"{rid}.json"


def slime_job_record(run_dir: Path) -> Path:
    """The slime job's Ray submission id, round and dashboard port (make stop finds it here)."""
    return Path(run_dir) / "slime-job.json"


def ray_token(run_dir: Path) -> Path:
    """The run's Ray token (a secret: 0600 in a 0700 dir; pyhelpers/launch/ray_auth.py)."""
    return Path(run_dir) / "ray" / "auth-token"


def shopsim_gate_token(run_dir: Path) -> Path:
    """The run's token for ShopSimulator's gate on a multi-node run (a secret: 0600 in a 0700 dir;
    pyhelpers/launch/gate_auth.py)."""
    return Path(run_dir) / "shopsim-gate" / "token"


def job_netrc(run_dir: Path) -> Path:
    """The slime job's W&B key as a netrc file (a secret: 0600, there only while a job runs;
    pyhelpers/launch/secret_env.py)."""
    return Path(run_dir) / "ray" / "job-netrc"


def ray_sessions(run_dir: Path) -> Path:
    """The Ray sessions this run's head created, one name a line (pyhelpers/launch/ray_sessions.py)."""
    return Path(run_dir) / "ray" / "sessions"


def round_name(r: int) -> str:
    """A round's directory name under rounds/."""
    return f"round-{r:03d}"


@dataclass(frozen=True)
class RoundFiles:
    """One round's directory, rounds/round-NNN/, for code that holds only that directory: the
    rollout plugin inside slime's Ray actor (keep this module import-light), the analyst,
    `pyhelpers eval --round-dir`."""
    dir: Path

    @property
    def number(self) -> int | None:
        """The round number in the directory's name (round-NNN), None for another name."""
        m = re.fullmatch(r"round-([0-9]+)", self.dir.name)
        return int(m.group(1)) if m else None

    @property
    def run_dir(self) -> Path:
        """The run's directory: rounds/round-NNN's grandparent."""
        return self.dir.parent.parent

    def of_round(self, r: int) -> RoundFiles:
        """Round r of the same run: its directory beside this one (the one-job mode's eval hook holds
        the run's first round's directory and plays round r's evaluation)."""
        return RoundFiles(self.dir.parent / round_name(r))

    @property
    def bank(self) -> Path:
        """The bank injected into this round."""
        return self.dir / "skillbank.json"

    @property
    def spool(self) -> Path:
        """The rollout plugin's failure records, for the analyst."""
        return self.dir / "spool"

    @property
    def candidates(self) -> Path:
        """The analyst's candidate skills, for compile."""
        return self.dir / "candidates"

    @property
    def analyst_dir(self) -> Path:
        return self.dir / "analyst"

    @property
    def compiled(self) -> Path:
        return self.dir / "compiled.json"

    @property
    def val_dir(self) -> Path:
        return self.dir / "val"

    @property
    def gate_dir(self) -> Path:
        return self.dir / "gate"

    @property
    def gate_decisions(self) -> Path:
        return self.gate_dir / "decisions.json"

    @property
    def val_progress(self) -> Path:
        """The one-job mode's eval hook's latest line of val's progress, which the driver shows
        (evaluate/progress.py LatestLine). One file for each play: the gate's first line must not
        replace val's last one before the driver's next read."""
        return self.dir / "val-progress.txt"

    @property
    def gate_progress(self) -> Path:
        """As val_progress, for the gate."""
        return self.dir / "gate-progress.txt"

    @property
    def stages_dir(self) -> Path:
        return self.dir / "stages"

    @property
    def plugin_config(self) -> Path:
        return self.dir / "slime.yaml"

    @property
    def started_marker(self) -> Path:
        """Written by the rollout plugin at the job's first step: the job has its GPUs."""
        return self.dir / "plugin.started"

    @property
    def plugin_process(self) -> Path:
        """{"pid", "ticks"} of the process the rollout plugin runs in (slime's RolloutManager actor)."""
        return self.dir / "plugin.pid"

    @property
    def rollout_metrics(self) -> Path:
        """The rollout plugin's per-step metrics (rollout/metrics.py)."""
        return self.dir / "rollout_metrics.jsonl"


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
        return wandb_dir(self.run_dir)

    @property
    def slime_job(self) -> Path:
        return slime_job_record(self.run_dir)

    @property
    def final_bank(self) -> Path:
        return self.run_dir / "skillbank-final.json"

    @property
    def baseline_dir(self) -> Path:
        return self.run_dir / "baseline"

    @property
    def baseline_val_dir(self) -> Path:
        return self.baseline_dir / "val"

    @property
    def baseline_val_summary(self) -> Path:
        return summary(self.baseline_val_dir)

    @property
    def wandb_offline_runs(self) -> Path:
        return wandb_runs_dir(self.run_dir)

    @property
    def stopped_marker(self) -> Path:
        """Written by `make stop`: the driver starts nothing new until make train / make resume clears it."""
        return self.run_dir / "stopped"

    @property
    def migrating_marker(self) -> Path:
        """Present while `make migrate-machine` has not verified every file: nothing resumes."""
        return self.run_dir / "MIGRATING"

    def round_dir(self, r: int) -> Path:
        return self.run_dir / "rounds" / round_name(r)

    def round(self, r: int) -> RoundFiles:
        return RoundFiles(self.round_dir(r))

    def bank_in(self, r: int) -> Path:
        """The bank injected into round r."""
        return self.round(r).bank

    def bank_out(self, r: int, rounds: int) -> Path:
        """The artifact whose existence means round r's inject is done."""
        return self.final_bank if r == rounds - 1 else self.bank_in(r + 1)

    def stage_record(self, r: int, stage: str) -> Path:
        return self.round(r).stages_dir / f"{stage}.done"

    def plugin_config(self, r: int) -> Path:
        return self.round(r).plugin_config

    def started_marker(self, r: int) -> Path:
        return self.round(r).started_marker

    def rollout_metrics(self, r: int) -> Path:
        return self.round(r).rollout_metrics

    def spool(self, r: int) -> Path:
        return self.round(r).spool

    def candidates(self, r: int) -> Path:
        return self.round(r).candidates

    def compiled(self, r: int) -> Path:
        return self.round(r).compiled

    def val_dir(self, r: int) -> Path:
        return self.round(r).val_dir

    def val_summary(self, r: int) -> Path:
        return summary(self.val_dir(r))

    def gate_dir(self, r: int) -> Path:
        return self.round(r).gate_dir

    def gate_summary(self, r: int) -> Path:
        return summary(self.gate_dir(r))

    def gate_decisions(self, r: int) -> Path:
        return self.round(r).gate_decisions

    # --- weights ---------------------------------------------------------------------------
    @property
    def megatron(self) -> Path:
        return self.save_dir / "megatron"

    @property
    def hf_link(self) -> Path:
        return self.save_dir / "hf"

    def hf_dir(self, iteration: int) -> Path:
        return self.save_dir / f"hf-{iteration:07d}"

    @property
    def hf_dir_template(self) -> str:
        """hf_dir with slime's placeholder: --save-hf names each save's HF export by it."""
        return str(self.save_dir / "hf-{rollout_id:07d}")

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
    return RunLayout(cfg.run_dir, cfg.save_dir, cfg.STEPS_PER_ROUND)
