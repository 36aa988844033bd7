"""`pyhelpers run prepare-train|submit-job|watch-job|stop-job|export`: the insides of the
process stages that need a decision (bin/stage-train and the driver call them)."""

from __future__ import annotations

import time

import click

from .. import events, launch_args, procs, rayjob, stages
from ..errors import ToolkitError
from .run_cmd import _ctx, run


@run.command("prepare-train")
@click.option("--round", "round_", type=int, required=True)
def run_prepare_train(round_):
    """Before round ROUND trains: its slime.yaml (--custom-config-path; round 0's bank from
    SEED_BANK or empty), the disk guard, and a clean "started" marker. Prints the round dir.

    \b
    Example:
      round_dir="$(pyhelpers run prepare-train --round 0)"
    """
    from .. import diskguard
    from ..rollout.settings import plugin_values, write_plugin_yaml
    from ..skills import bank as bank_mod
    from ..skills.tokens import counter_for

    cfg, lay = _ctx()
    d = lay.round_dir(round_)
    for sub in ("spool", "candidates", "stages"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    if round_ == 0 and not lay.bank_in(0).is_file():
        if cfg.get("SEED_BANK"):
            seed = bank_mod.load_bank(cfg.path("SEED_BANK"))
            bank_mod.write_bank(lay.bank_in(0), {**seed, "round": 0})
        else:
            hf = cfg.path("HF_MODEL")
            name, count = counter_for(hf if hf.is_dir() else None)
            bank_mod.write_bank(lay.bank_in(0), bank_mod.empty_bank(0, name, bank_mod.header_tokens(count)))
    write_plugin_yaml(lay.plugin_config(round_), **plugin_values(cfg, lay, round_))
    need = diskguard.check(cfg, lay, "train")
    click.echo(f"disk: {need.explain()}", err=True)
    lay.started_marker(round_).unlink(missing_ok=True)
    click.echo(str(d))


@run.command("submit-job", context_settings={"ignore_unknown_options": True})
@click.option("--round", "round_", type=int, required=True)
@click.argument("model_args", nargs=-1, type=click.UNPROCESSED)
def run_submit_job(round_, model_args):
    """Submit round ROUND's slime job to the run's Ray head (job REST API, recorded submission
    id) and start `slime-log`, the copy of the job's output into logs/slime.log. MODEL_ARGS are
    the flags of slime's model-args script. Prints the submission id.

    \b
    Example:
      pyhelpers run submit-job --round 0 -- "${MODEL_ARGS[@]}"
    """
    from ..rollout.flags import plugin_flags

    cfg, lay = _ctx()
    args = launch_args.slime_train(cfg, lay, round_, plugin_flags())
    entry = launch_args.slime_entrypoint(cfg, list(model_args), args)
    job_id = f"{cfg.run_name}-r{round_:03d}-{int(time.time())}"
    port = cfg.int("RAY_DASHBOARD_PORT")
    rayjob.JobApi(port).submit(job_id, entry, launch_args.runtime_env(cfg))
    source = rayjob.driver_log(cfg.ray_temp_dir, job_id)
    rayjob.record_job(lay.run_dir, job_id, round_, port, str(source))
    events.append(lay.run_dir, "job-submitted", round=round_, job_id=job_id, num_rollout=lay.num_rollout(round_))
    procs.start("slime-log", ["tail", "-n", "+1", "-s", "0.2", "-F", str(source)], lay.pids, lay.logs)
    click.echo(job_id)


@run.command("watch-job")
@click.option("--round", "round_", type=int, required=True)
@click.option("--poll", type=float, default=0.25, show_default=True, help="Seconds between status polls.")
def run_watch_job(round_, poll):
    """Wait for the recorded slime job; stop it if it has not started training within
    JOB_START_TIMEOUT (the rollout plugin marks its first step). Exit 1 unless it succeeded, with
    Ray's message and the last lines of logs/slime.log.

    \b
    Example:
      pyhelpers run watch-job --round 0
    """
    cfg, lay = _ctx()
    job = rayjob.recorded_job(lay.run_dir)
    if not job or job.get("round") != round_:
        raise ToolkitError(f"no slime job of round {round_} is recorded", str(rayjob.record_path(lay.run_dir)),
                           "submit it first (`pyhelpers run submit-job`), or run `make resume`")
    job_id = job["submission_id"]
    api = rayjob.JobApi(cfg.int("RAY_DASHBOARD_PORT"))
    outcome = rayjob.watch(job_id, api.info, api.stop, rayjob.marker_started(lay.started_marker(round_)),
                           cfg.float("JOB_START_TIMEOUT"), poll=poll, progress=lambda s: click.echo(s, err=True))
    events.append(lay.run_dir, "job-end", round=round_, job_id=job_id, status=outcome.status,
                  exit_code=outcome.exit_code)
    time.sleep(0.3)  # let slime-log copy the job's last lines before it is stopped
    _stop_log_copy(lay)
    if not outcome.ok:
        tail = "\n".join(procs.log_tail(lay.logs / "slime-log.log", 30))
        click.echo(f"--- last lines of the slime job ({lay.logs / 'slime-log.log'}) ---\n{tail}\n---", err=True)
        raise ToolkitError(f"slime job {job_id} {outcome.status} (exit code {outcome.exit_code}): "
                           f"{outcome.message.splitlines()[0] if outcome.message else ''}",
                           f"round {round_}; full log: {lay.logs / 'slime-log.log'}",
                           "fix the cause shown above, then `make resume` (training continues from the newest "
                           "checkpoint)")
    click.echo(f"slime job {job_id} succeeded")


def _stop_log_copy(lay) -> None:
    if procs.pidfile(lay.pids, "slime-log").exists():
        procs.stop_all(lay.pids, 2.0, names=["slime-log"])


@run.command("stop-job")
def run_stop_job():
    """Ask Ray to stop the recorded slime job, if it still runs (never by name).

    \b
    Example:
      pyhelpers run stop-job
    """
    cfg, lay = _ctx()
    click.echo(stop_recorded_job(lay, cfg.float("STOP_GRACE")), err=True)


def stop_recorded_job(lay, grace: float) -> str:
    """Stop the job named in runs/<RUN>/slime-job.json and wait up to `grace` s for it to end."""
    job = rayjob.recorded_job(lay.run_dir)
    if not job:
        return ""
    api, job_id = rayjob.JobApi(job["dashboard_port"], timeout=3.0), job["submission_id"]
    try:
        if api.info(job_id).get("status") in rayjob.TERMINAL:
            return f"slime job {job_id}: already ended"
        api.stop(job_id)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if api.info(job_id).get("status") in rayjob.TERMINAL:
                return f"slime job {job_id}: stopped"
            time.sleep(0.2)
        return f"slime job {job_id}: still stopping after {grace:g} s (stopping the Ray head ends it)"
    except Exception as exc:  # the head may already be gone; stopping the head ends the job anyway
        return f"slime job {job_id}: Ray not reachable ({type(exc).__name__}); stopping the Ray head ends it"
    finally:
        _stop_log_copy(lay)


@run.command("export")
@click.option("--round", "round_", type=int, required=True)
def run_export(round_):
    """The export stage: disk guard, convert round ROUND's checkpoint to hf-<iter>/ with
    CONVERT_TO_HF (unless slime's --save-hf wrote it), verify, flip `hf`, remove older exports.

    \b
    Example:
      pyhelpers run export --round 0
    """
    cfg, lay = _ctx()
    target, removed = stages.run_export(cfg, lay, round_, lay.logs / "export.log",
                                        progress=lambda s: click.echo(s, err=True))
    click.echo(f"hf -> {target.name}" + (f" (removed {', '.join(p.name for p in removed)})" if removed else ""),
               err=True)


@run.command("service")
@click.argument("name", type=click.Choice(["shopsim", "ray-head", "eval-server"]))
@click.option("--model", help="eval-server: the model dir [default: TRAIN_SAVE/RUN_NAME/hf].")
@click.option("--round", "round_", type=int, help="Round, for the event log.")
def run_service(name, model, round_):
    """Start service NAME unless it is up (own process group, pidfile, log), then wait until it
    answers (its *_START_TIMEOUT knob). Exit 1 with its log's tail when it dies or times out.

    \b
    Example:
      pyhelpers run service shopsim
      pyhelpers run service eval-server --round 0
    """
    from .. import ready, services

    cfg, lay = _ctx()
    try:
        click.echo(services.ensure(cfg, lay, name, model=model, round_=round_,
                                   progress=lambda s: click.echo(s, err=True)), err=True)
    except ready.NotReady as exc:
        click.echo(f"--- last {len(exc.log_tail)} lines of the log of {name} ---", err=True)
        click.echo("\n".join(exc.log_tail), err=True)
        raise


@run.command("watch-shopsim")
@click.option("--round", "round_", type=int, required=True)
def run_watch_shopsim(round_):
    """Run beside a stage: restart ShopSimulator when it dies, at most SHOPSIM_MAX_RESTARTS times
    in the round; beyond that stop the round's slime job (the stage then fails, saying why).
    Runs until TERM.

    \b
    Example:
      pyhelpers run watch-shopsim --round 0
    """
    import signal
    import threading

    from .. import services

    cfg, lay = _ctx()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    def give_up(reason: str) -> None:
        click.echo(reason, err=True)
        click.echo(stop_recorded_job(lay, cfg.float("STOP_GRACE")), err=True)

    services.watch_shopsim(cfg, lay, round_, stop.wait, give_up, progress=lambda s: click.echo(s, err=True))


# What each process stage runs; the driver only names the stage.
def _stage_argv(cfg, stage: str, round_: int) -> list[str]:
    import sys

    if stage == "export":
        return [sys.executable, "-m", "pyhelpers", "run", "export", "--round", str(round_)]
    return [str(cfg.root / "bin" / f"stage-{stage}"), str(round_)]


@run.command("stage")
@click.argument("stage", type=click.Choice(["train", "export", "evaluate", "baseline"]))
@click.option("--round", "round_", type=int, required=True)
def run_stage(stage, round_):
    """Run one process stage as service stage-STAGE in the foreground (own process group and
    pidfile, log in logs/stage-STAGE.log, streamed here); exit with its status. Records the
    start and end in events.jsonl. Dies with the driver; the stage then stays recorded.

    \b
    Example:
      pyhelpers run stage train --round 0
    """
    from .. import foreground

    foreground.die_with_parent()
    cfg, lay = _ctx()
    t0 = time.monotonic()
    events.append(lay.run_dir, "stage-start", round=round_, stage=stage)
    status = foreground.run(f"stage-{stage}", _stage_argv(cfg, stage, round_), lay.pids, lay.logs,
                            cfg.float("STOP_GRACE"), click.get_binary_stream("stderr"))
    events.append(lay.run_dir, "stage-end", round=round_, stage=stage, status=status,
                  seconds=round(time.monotonic() - t0, 3))
    raise SystemExit(status)
