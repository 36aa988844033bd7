"""`pyhelpers run ...`: where the run stands and what the driver does next.

This module holds the run's state commands (init, check-resume, check-lock);
run_stage_cmd.py the training loop and the services it starts; run_ops_cmd.py what users call from
another shell (status, plan, logs, stop, wandb-sync). Each holds a `run` group with its share of
the commands; pyhelpers/cli/__init__.py (GROUPS) merges them into `pyhelpers run`.
"""

from __future__ import annotations

import click

from pyhelpers.cli.common import ctx
from pyhelpers.config.load import Config
from pyhelpers.errors import ToolkitError
from pyhelpers.loop.console import stamp  # their lines are bin/train's, in its format
from pyhelpers.overview import manifest, rehearsal
from pyhelpers.run import lock
from pyhelpers.run.stop import clear_stop
from pyhelpers.stages import position


@click.group()
def run():
    """Where the run stands and what the driver does next."""


@run.command("init")
@click.option("--rehearsal", "as_rehearsal", is_flag=True, help="Mark the run as a rehearsal (stand-ins, scratch weights).")
@click.option("--resume", is_flag=True, help="Refuse unless the run exists (make resume).")
@click.option("--continue-stopped", "started_at", type=float, metavar="EPOCH",
              help="Continue a run `make stop` stopped before EPOCH (when make train/resume started).")
def run_init(as_rehearsal, resume, started_at):
    """Create the run's directories and record run.json, or compare with it on a resume.
    With --continue-stopped, a run stopped by `make stop` is continued (bin/train passes it).

    \b
    Example:
      pyhelpers run init
    """
    cfg, lay = ctx()
    if resume or lay.migrating_marker.is_file():
        _require_run(cfg, lay)
    rehearsal.guard(lay, as_rehearsal)
    for d in (lay.run_dir, lay.pids, lay.logs, lay.wandb_dir, lay.megatron):
        d.mkdir(parents=True, exist_ok=True)
    for change in manifest.record_or_compare(cfg, lay.manifest, rehearsal=as_rehearsal):
        click.echo(stamp("train", f"config change recorded in run.json: {change}"), err=True)
    if as_rehearsal:
        rehearsal.mark(lay)
    if started_at is not None:

        note = clear_stop(lay, started_at)
        if note:
            click.echo(stamp("train", f"continuing run {cfg.run_name}, {note}"), err=True)
    click.echo(str(lay.run_dir))


def _require_run(cfg: Config, lay) -> None:
    if lay.migrating_marker.is_file():
        raise ToolkitError("a migration into this run has not finished (not every file is verified)",
                           str(lay.migrating_marker), "run make migrate-machine FROM=... again; it continues "
                           "where it stopped")
    if not lay.manifest.is_file():
        raise ToolkitError(f"there is no run named {cfg.run_name} to resume", str(lay.run_dir),
                           "start it with `make train`, or set RUN_NAME to the run you mean (`ls "
                           f"{lay.run_dir.parent}`)")


@run.command("check-resume")
@click.option("--round", "round_", type=int, help="The round the user asked for (0-based).")
def run_check_resume(round_):
    """Refuse a `make resume [ROUND=N]` the disk contradicts, saying what was found: no such run,
    or (with --round) a round other than the one the artifacts say. Changes nothing.

    \b
    Example:
      pyhelpers run check-resume --round 1
    """
    cfg, lay = ctx()
    _require_run(cfg, lay)
    if round_ is None:
        pos = position.position(lay, cfg.ROUNDS, cfg.BASELINE_VAL)
    else:
        pos = position.check_resume_round(lay, cfg.ROUNDS, round_)
    where = "finished" if pos.finished else f"round {pos.round} at {pos.stage}"
    click.echo(stamp("train", f"resuming {cfg.run_name}: {where} ({pos.detail})"), err=True)


@run.command("check-lock")
def run_check_lock():
    """Exit 1, naming the holder, while a driver holds this run's lock (changes nothing).

    \b
    Example:
      pyhelpers run check-lock && echo "no driver is running"
    """

    _, lay = ctx()
    lock.require_free(lay.lock)

