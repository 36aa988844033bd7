"""`pyhelpers run stop|cleanup|rehearsal-reset|...`: what users (and the driver's exit path) call
about a whole run: stopping it, and looking at it."""

from __future__ import annotations

import click

from .. import runstop
from .run_cmd import _ctx, run
from .run_stage_cmd import stop_recorded_job


@run.command("stop")
def run_stop():
    """Stop the run from any shell: the driver (TERM, then KILL if it does not let go), the slime
    job, every recorded process group in reverse order, Ray's workers. Final: the driver will not
    start anything new (runs/<RUN>/stopped) until `make train` or `make resume`.

    \b
    Example:
      pyhelpers run stop
    """
    cfg, lay = _ctx()
    if not lay.run_dir.is_dir():
        click.echo(f"no run named {cfg.run_name} in {lay.run_dir.parent}: nothing to stop")
        return
    for line in runstop.stop_run(lay, cfg.ray_temp_dir, cfg.float("STOP_GRACE"), stop_recorded_job,
                                 progress=click.echo):
        click.echo(line)
    click.echo(f"run {cfg.run_name} stopped; continue it with `make resume`")


@run.command("cleanup")
def run_cleanup():
    """Stop the slime job, every recorded service (reverse order) and Ray's stragglers: the
    driver's exit path, and `make resume`'s first step for what a killed driver left running.

    \b
    Example:
      pyhelpers run cleanup
    """
    cfg, lay = _ctx()
    for line in runstop.cleanup(lay, cfg.ray_temp_dir, cfg.float("STOP_GRACE"), stop_recorded_job):
        click.echo(line, err=True)


@run.command("rehearsal-reset")
def run_rehearsal_reset():
    """Before a fresh `make rehearse`: delete the previous rehearsal of RUN_NAME (only files
    marked as a rehearsal's; refuses real checkpoints and real runs).

    \b
    Example:
      RUN_NAME=rehearsal pyhelpers run rehearsal-reset
    """
    from .. import rehearsal, runlock
    from ..errors import ToolkitError

    cfg, lay = _ctx()
    if not runstop.lock_free(lay.lock):
        raise runlock.refusal(lay.lock)
    if rehearsal.is_rehearsal(lay) is False:
        raise ToolkitError(f"RUN_NAME={cfg.run_name} is a real run, not a rehearsal", str(lay.manifest),
                           "give the rehearsal its own RUN_NAME (default: rehearsal)")
    if lay.run_dir.is_dir():  # a killed earlier rehearsal may have left services running
        runstop.cleanup(lay, cfg.ray_temp_dir, cfg.float("STOP_GRACE"), stop_recorded_job)
    for p in rehearsal.fresh(lay):
        click.echo(f"removed the previous rehearsal's {p}", err=True)


@run.command("summary")
def run_summary():
    """The finished run in a few lines: val success per round and the final bank.

    \b
    Example:
      pyhelpers run summary
    """
    from .. import runstatus

    cfg, lay = _ctx()
    for line in runstatus.summary_lines(cfg, lay):
        click.echo(line)
