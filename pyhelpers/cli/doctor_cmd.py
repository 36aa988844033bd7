"""`pyhelpers doctor [--json] [--profile full|rehearse]` and `pyhelpers doctor install-hooks`."""

from __future__ import annotations

import json
import os

import click

from pyhelpers.config import load
from pyhelpers.doctor import hooks
from pyhelpers.doctor.base import PROFILES, TERMINAL, WIDTH, wrap
from pyhelpers.errors import ToolkitError


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object, for machines.")
@click.option("--profile", type=click.Choice(PROFILES), default=None,
              help="full (a GPU machine) or rehearse (a CPU machine); default DOCTOR_PROFILE.")
@click.option("-v", "--verbose", is_flag=True, help="Also print every check's detail lines.")
@click.option("--fresh-run", is_flag=True,
              help="Check the run's files as a new run reads them (a fresh rehearsal replaces the previous one).")
@click.option("--brief", is_flag=True,
              help="Only each FAILed check's name and fix, in 80 columns, and the verdict (make train's preflight).")
@click.pass_context
def doctor(ctx, as_json, profile, verbose, fresh_run, brief):
    """Preflight this machine: one PASS/WARN/FAIL/SKIP line per check with what was found and
    the fix; exit 1 if any check FAILs. Details (arithmetic, listings) come with FAIL/WARN
    lines, or with every line under -v.

    \b
    Example:
      pyhelpers doctor
      pyhelpers doctor --profile rehearse --json
    """
    if ctx.invoked_subcommand:
        return
    # lazy: doctor.runner (every check, ~70 ms) only for this command
    from pyhelpers.doctor.runner import counts, run_checks

    try:
        cfg = load.load()
    except ToolkitError:
        raise  # the root group prints it as `<what>: <where> (<fix>)`
    except Exception as exc:  # e.g. an unreadable .env: say so, no traceback
        raise click.ClickException(f"cannot read the configuration: {type(exc).__name__}: {exc}") from exc
    profile = profile or cfg.DOCTOR_PROFILE or "full"
    if profile not in PROFILES:
        raise click.UsageError(f"DOCTOR_PROFILE={profile!r} is not one of {', '.join(PROFILES)}")
    results = run_checks(cfg, dict(os.environ), profile, fresh_run=fresh_run)
    n = counts(results)
    if as_json:
        click.echo(json.dumps({"profile": profile, "ok": not n["FAIL"], "counts": n,
                               "checks": [r.as_dict() for r in results]}, indent=2))
    else:
        width = TERMINAL if brief else WIDTH
        if brief:  # make train's preflight: what to fix, one entry per failure; make doctor has the rest
            lines = [ln for r in results if r.status == "FAIL" for ln in r.brief(width)]
        else:
            lines = wrap(f"doctor: profile {profile}, run {cfg.run_name}, configuration from "
                         f"env/defaults.env < {cfg.env_file} < environment", rest="  ")
            lines += [ln for r in results for ln in r.lines(details=verbose or r.status in ("FAIL", "WARN"))]
        if profile == "full" and any(r.name in ("gpus", "conda") and r.status == "FAIL" for r in results):
            # What a machine without GPUs or the training image can run instead, and the check of
            # this machine for it (before the verdict, which stays the last line: bin/train logs it).
            lines += wrap("doctor: no GPU or training image here? `make rehearse` runs the whole run on "
                          "stand-ins (`make doctor PROFILE=rehearse` checks what it needs)", rest="  ", width=width)
        summary = ", ".join(f"{v} {k}" for k, v in n.items())
        tail = " — fix the FAIL lines, then run `make doctor` again" if n["FAIL"] and not brief else ""
        click.echo("\n".join([*lines, f"doctor: {summary}{tail}"]))
    ctx.exit(1 if n["FAIL"] else 0)


@doctor.command("install-hooks")
@click.option("--dry-run", is_flag=True, help="Print what would be copied; change nothing.")
def install_hooks(dry_run):
    """Copy the cuDNN activate.d/deactivate.d hooks into the slime env (M4): the only thing the
    toolkit writes into a conda env. A different file of the same name is kept as .orig.

    \b
    Example:
      pyhelpers doctor install-hooks --dry-run
    """
    cfg = load.load()
    steps = hooks.plan(cfg)
    for step in steps:
        click.echo(step.describe(dry_run))
    if not dry_run:
        hooks.apply(steps)
        click.echo(f"install-hooks: done; activate again (conda activate {cfg.SLIME_ENV}) and run `make doctor`")
