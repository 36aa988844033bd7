"""`make wandb-sync`: upload a run's offline W&B data later (architecture §8, M17).

With WANDB_MODE=offline every process of the run (slime, val, gate, analyst) writes its W&B run
under runs/<RUN_NAME>/wandb/wandb/offline-run-*/. `wandb sync` uploads one such directory and
leaves a `<run>.wandb.synced` file beside its data; those are skipped next time. The key reaches
`wandb sync` through its environment (WANDB_API_KEY from .env) or ~/.netrc, never its argv.
"""

from __future__ import annotations

from pathlib import Path

from pyhelpers.run.layout import wandb_dir


def offline_runs(run_dir: Path) -> list[Path]:
    return sorted(p for p in wandb_dir(run_dir).glob("**/offline-run-*") if p.is_dir())


def is_synced(run: Path) -> bool:
    return any(run.glob("*.wandb.synced"))


def pending(run_dir: Path) -> list[Path]:
    return [p for p in offline_runs(run_dir) if not is_synced(p)]
