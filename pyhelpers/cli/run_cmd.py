"""`pyhelpers run ...`: the decisions the bin/ driver acts on, one small command each."""

from __future__ import annotations

import json
import sys

import click

from .. import checkpoints as ck
from .. import config as config_mod
from .. import launch_args, runmanifest, runstate, stages
from ..runlayout import from_config


def _ctx():
    cfg = config_mod.load()
    return cfg, from_config(cfg)


@click.group()
def run():
    """Where the run stands and what the driver does next."""


@run.command("init")
@click.option("--rehearsal", is_flag=True, help="Mark the run as a rehearsal (stand-ins, scratch weights).")
def run_init(rehearsal):
    """Create the run's directories and record run.json, or compare with it on a resume.

    \b
    Example:
      pyhelpers run init
    """
    cfg, lay = _ctx()
    for d in (lay.run_dir, lay.pids, lay.logs, lay.wandb_dir, lay.megatron):
        d.mkdir(parents=True, exist_ok=True)
    for change in runmanifest.record_or_compare(cfg, lay.manifest, rehearsal=rehearsal):
        click.echo(f"config change recorded in run.json: {change}", err=True)
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


@run.command("check-resume")
@click.option("--round", "round_", type=int, required=True, help="The round the user asked for (0-based).")
def run_check_resume(round_):
    """Refuse a `make resume ROUND=N` the disk contradicts, saying what was found.

    \b
    Example:
      pyhelpers run check-resume --round 1
    """
    cfg, lay = _ctx()
    pos = runstate.check_resume_round(lay, cfg.int("ROUNDS"), round_)
    click.echo(f"resuming round {pos.round} at {pos.stage}: {pos.detail}")


@run.command("rotate")
@click.option("--dry-run", is_flag=True, help="Print what would be deleted; delete nothing.")
def run_rotate(dry_run):
    """Delete Megatron checkpoints older than the newest complete one (never the tracked one).

    \b
    Example:
      pyhelpers run rotate --dry-run
    """
    _, lay = _ctx()
    plan = ck.rotate(lay.megatron, dry_run=dry_run)
    verb = "would delete" if dry_run else "deleted"
    for p in plan.delete:
        click.echo(f"{verb} {p.relative_to(lay.save_dir)}")
    for note in plan.notes:
        click.echo(f"note: {note}", err=True)
    click.echo(f"kept iter_{plan.keep:07d}" if plan.keep is not None else "no complete checkpoint")


@run.command("export-plan")
@click.option("--round", "round_", type=int, required=True)
def run_export_plan(round_):
    """Print the export decision: `flip` or `convert`, then the iter_* dir and the staging dir.

    \b
    Example:
      pyhelpers run export-plan --round 0
    """
    _, lay = _ctx()
    plan = stages.export_plan(lay, round_)
    click.echo("\n".join([plan.action, str(plan.source), str(plan.staging)]))


@run.command("export-finish")
@click.option("--round", "round_", type=int, required=True)
def run_export_finish(round_):
    """Verify the export, rename it into place, flip `hf` atomically, remove older exports.

    \b
    Example:
      pyhelpers run export-finish --round 0
    """
    _, lay = _ctx()
    target, removed = stages.finish_export(lay, round_)
    stages.write_record(lay, round_, "export", "ok", target=target)
    click.echo(f"hf -> {target.name}" + (f" (removed {', '.join(p.name for p in removed)})" if removed else ""))


@run.command("record")
@click.option("--round", "round_", type=int, required=True)
@click.option("--stage", required=True)
@click.option("--status", default="ok")
def run_record(round_, stage, status):
    """Write stages/<stage>.done for a finished stage (a record for humans; artifacts decide).

    \b
    Example:
      pyhelpers run record --round 0 --stage train
    """
    _, lay = _ctx()
    stages.write_record(lay, round_, stage, status)


def _nul(argv: list[str]) -> None:
    sys.stdout.write("\0".join(argv) + "\0")


@run.command("argv")
@click.argument("program", type=click.Choice(["slime", "ray-head", "eval-server", "shopsim"]))
@click.option("--round", "round_", type=int, default=0)
def run_argv(program, round_):
    """Print a launch command, NUL-separated for `mapfile -d ''` (no secret is ever in it).

    \b
    Example:
      mapfile -d '' -t argv < <(pyhelpers run argv slime --round 0)
    """
    cfg, lay = _ctx()
    if program == "slime":
        from ..rollout.flags import plugin_flags

        _nul(launch_args.slime_train(cfg, lay, round_, plugin_flags()))
    elif program == "ray-head":
        _nul(launch_args.ray_head(cfg))
    elif program == "shopsim":
        _nul(launch_args.shopsim(cfg))
    else:
        _nul(launch_args.eval_server(cfg, str(lay.hf_link)))


@run.command("runtime-env")
def run_runtime_env():
    """Print the --runtime-env-json for `ray job submit` (import paths; never a secret).

    \b
    Example:
      pyhelpers run runtime-env
    """
    cfg, _ = _ctx()
    click.echo(launch_args.runtime_env(cfg))


@run.command("watch-job")
@click.option("--job-id", required=True)
@click.option("--round", "round_", type=int, required=True)
@click.option("--poll", type=float, default=2.0, show_default=True, help="Seconds between status polls.")
def run_watch_job(job_id, round_, poll):
    """Wait for a submitted slime job; stop it if it has not started training within
    JOB_START_TIMEOUT (the rollout plugin marks its first episode). Exit 1 unless it succeeded.

    \b
    Example:
      pyhelpers run watch-job --job-id myrun-r000-1 --round 0
    """
    from .. import rayjob

    cfg, lay = _ctx()
    api = rayjob.JobApi(cfg.int("RAY_DASHBOARD_PORT"))
    outcome = rayjob.watch(job_id, api.info, api.stop, rayjob.marker_started(lay.round_dir(round_) / "plugin.started"),
                           cfg.float("JOB_START_TIMEOUT"), poll=poll, progress=lambda s: click.echo(s, err=True))
    if not outcome.ok:
        raise click.ClickException(f"slime job {job_id} {outcome.status}: {outcome.message} "
                                   f"(exit code {outcome.exit_code}; log: {lay.logs / 'slime.log'})")
    click.echo(f"slime job {job_id} succeeded")


@run.command("stop-job")
@click.option("--job-id", required=True)
def run_stop_job(job_id):
    """Ask Ray to stop a job (the job's processes are Ray's; never killed by name).

    \b
    Example:
      pyhelpers run stop-job --job-id myrun-r000-1
    """
    from .. import rayjob

    cfg, _ = _ctx()
    try:
        rayjob.JobApi(cfg.int("RAY_DASHBOARD_PORT")).stop(job_id)
    except Exception as exc:  # the head may already be gone; stopping the head ends the job anyway
        click.echo(f"could not reach Ray to stop {job_id}: {exc}", err=True)


@run.command("round-dir")
@click.option("--round", "round_", type=int, required=True)
def run_round_dir(round_):
    """Print round ROUND's directory (created if missing, with spool/ and candidates/).

    \b
    Example:
      pyhelpers run round-dir --round 0
    """
    _, lay = _ctx()
    d = lay.round_dir(round_)
    for sub in ("spool", "candidates", "stages"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    click.echo(str(d))


@run.command("compile")
@click.option("--round", "round_", type=int, required=True)
@click.pass_context
def run_compile(ctx, round_):
    """Compile round ROUND's analyst candidates into compiled.json (the skillbank compile).

    \b
    Example:
      pyhelpers run compile --round 0
    """
    from .skillbank_cmd import compile_cmd

    cfg, lay = _ctx()
    d = lay.round_dir(round_)
    for sub in ("spool", "candidates"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    hf = cfg.path("HF_MODEL")
    ctx.invoke(compile_cmd, bank_path=lay.bank_in(round_), cand_dir=d / "candidates", out=lay.compiled(round_),
               round_=round_, hf_dir=hf if hf.is_dir() else None, spool_dir=d / "spool", embedder=None,
               dry_run=False)
    stages.write_record(lay, round_, "compile", "ok", output=lay.compiled(round_))


@run.command("inject")
@click.option("--round", "round_", type=int, required=True)
@click.pass_context
def run_inject(ctx, round_):
    """Apply round ROUND's gate decisions: write the next round's bank (last round: the final bank).

    \b
    Example:
      pyhelpers run inject --round 0
    """
    from .skillbank_cmd import inject_cmd

    cfg, lay = _ctx()
    decisions = lay.round_dir(round_) / "gate" / "decisions.json"
    out = lay.bank_out(round_, cfg.int("ROUNDS"))
    ctx.invoke(inject_cmd, compiled_path=lay.compiled(round_), decisions_path=decisions if decisions.is_file() else None,
               out=out, round_=round_, dry_run=False)
    stages.write_record(lay, round_, "inject", "ok", output=out)


@run.command("plugin-config")
@click.option("--round", "round_", type=int, required=True)
def run_plugin_config(round_):
    """Write the round's slime.yaml (--custom-config-path) for the rollout plugin; round 0's bank is
    created first from SEED_BANK (or empty).

    \b
    Example:
      pyhelpers run plugin-config --round 0
    """
    from ..rollout.settings import plugin_values, write_plugin_yaml
    from ..skills import bank as bank_mod
    from ..skills.tokens import counter_for

    cfg, lay = _ctx()
    if round_ == 0 and not lay.bank_in(0).is_file():
        if cfg.get("SEED_BANK"):
            seed = bank_mod.load_bank(cfg.path("SEED_BANK"))
            bank_mod.write_bank(lay.bank_in(0), {**seed, "round": 0})
        else:
            hf = cfg.path("HF_MODEL")
            name, count = counter_for(hf if hf.is_dir() else None)
            bank_mod.write_bank(lay.bank_in(0), bank_mod.empty_bank(0, name, bank_mod.header_tokens(count)))
    write_plugin_yaml(lay.plugin_config(round_), **plugin_values(cfg, lay, round_))
    click.echo(str(lay.plugin_config(round_)))
