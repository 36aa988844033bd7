"""`pyhelpers run ...`: where the run stands and what the driver does next.

This module holds the run's state commands (init, next, check-resume, check-lock, argv);
run_stage_cmd.py the training loop and the services it starts; run_ops_cmd.py what users call from
another shell (status, plan, logs, stop, wandb-sync). All register on the `run` group.
"""

from __future__ import annotations

import json
import sys

import click

from pyhelpers.cli.common import ctx as _ctx
from pyhelpers.errors import ToolkitError
from pyhelpers.launch import slime_args as launch_args
from pyhelpers.run import manifest as runmanifest
from pyhelpers.run import rehearsal as rehearsal_mod
from pyhelpers.run import state as runstate


@click.group()
def run():
    """Where the run stands and what the driver does next."""


@run.command("init")
@click.option("--rehearsal", is_flag=True, help="Mark the run as a rehearsal (stand-ins, scratch weights).")
@click.option("--resume", is_flag=True, help="Refuse unless the run exists (make resume).")
def run_init(rehearsal, resume):
    """Create the run's directories and record run.json, or compare with it on a resume.

    \b
    Example:
      pyhelpers run init
    """
    cfg, lay = _ctx()
    if resume or lay.migrating_marker.is_file():
        _require_run(cfg, lay)
    rehearsal_mod.guard(lay, rehearsal)
    for d in (lay.run_dir, lay.pids, lay.logs, lay.wandb_dir, lay.megatron):
        d.mkdir(parents=True, exist_ok=True)
    for change in runmanifest.record_or_compare(cfg, lay.manifest, rehearsal=rehearsal):
        click.echo(f"config change recorded in run.json: {change}", err=True)
    if rehearsal:
        rehearsal_mod.mark(lay)
    click.echo(str(lay.run_dir))


@run.command("next")
@click.option("--json", "as_json", is_flag=True)
def run_next(as_json):
    """Print the next stage as `ROUND STAGE` (or `done`), derived from the run's artifacts.

    \b
    Example:
      read -r round stage < <(pyhelpers run next)
    """
    cfg, lay = _ctx()
    pos = runstate.position(lay, cfg.int("ROUNDS"), cfg.flag("BASELINE_VAL"))
    if as_json:
        click.echo(json.dumps(pos.as_dict()))
    elif pos.finished:
        click.echo("done")
    else:
        click.echo(f"{pos.round} {pos.stage}")
    click.echo(f"next: {pos.detail}", err=True)


def _require_run(cfg, lay) -> None:
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
    cfg, lay = _ctx()
    _require_run(cfg, lay)
    if round_ is None:
        pos = runstate.position(lay, cfg.int("ROUNDS"), cfg.flag("BASELINE_VAL"))
    else:
        pos = runstate.check_resume_round(lay, cfg.int("ROUNDS"), round_)
    where = "finished" if pos.finished else f"round {pos.round} at {pos.stage}"
    click.echo(f"resuming {cfg.run_name}: {where} ({pos.detail})", err=True)


@run.command("check-lock")
def run_check_lock():
    """Exit 1, naming the holder, while a driver holds this run's lock (changes nothing).

    \b
    Example:
      pyhelpers run check-lock && echo "no driver is running"
    """
    from pyhelpers.run import lock as runlock

    _, lay = _ctx()
    runlock.require_free(lay.lock)


def _nul(argv: list[str]) -> None:
    sys.stdout.write("\0".join(argv) + "\0")


@run.command("argv")
@click.argument("program", type=click.Choice(["slime", "ray-head", "eval-server", "shopsim"]))
@click.option("--round", "round_", type=int, default=0)
@click.option("--model", type=click.Path(), help="eval-server: model dir [default: TRAIN_SAVE/RUN_NAME/hf].")
def run_argv(program, round_, model):
    """Print a launch command, NUL-separated for `mapfile -d ''` (no secret is ever in it).

    \b
    Example:
      mapfile -d '' -t argv < <(pyhelpers run argv slime --round 0)
    """
    cfg, lay = _ctx()
    if program == "slime":
        from pyhelpers.rollout.flags import plugin_flags

        _nul(launch_args.slime_train(cfg, lay, round_, plugin_flags()))
    elif program == "ray-head":
        _nul(launch_args.ray_head(cfg))
    elif program == "shopsim":
        _nul(launch_args.shopsim(cfg))
    else:
        _nul(launch_args.eval_server(cfg, model or str(lay.hf_link)))


# The other modules add their commands to `run`.
from pyhelpers.cli import run_ops_cmd, run_stage_cmd  # noqa: E402,F401
