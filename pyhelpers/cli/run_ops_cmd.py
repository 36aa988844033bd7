"""`pyhelpers run stop|cleanup|rehearsal-reset|...`: what users (and the driver's exit path) call
about a whole run: stopping it, and looking at it."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import click

from pyhelpers import report, stages
from pyhelpers.cli.common import ctx, echo_err
from pyhelpers.config import load
from pyhelpers.config.check import check
from pyhelpers.config.load import Config
from pyhelpers.doctor.envfile import netrc_has
from pyhelpers.errors import ToolkitError
from pyhelpers.launch import convert_base, slime_job
from pyhelpers.loop.console import stamp
from pyhelpers.overview import plan, rehearsal, status
from pyhelpers.procs import groups
from pyhelpers.run import hints, lock, stop
from pyhelpers.run.layout import from_config
from pyhelpers.stages import position
from pyhelpers.tracking import sync


@click.group()
def run():
    """Where the run stands and what the driver does next."""


def _stop_job(cfg: Config, lay):
    return lambda: slime_job.stop(cfg, lay)


@run.command("stop")
def run_stop():
    """Stop the run from any shell: the driver (TERM, then KILL if it does not let go), the slime
    job, every recorded process group in reverse order, Ray's workers. Final: the driver will not
    start anything new (runs/<RUN>/stopped) until `make train` or `make resume`.

    \b
    Example:
      pyhelpers run stop
    """
    cfg, lay = ctx()
    if not lay.run_dir.is_dir():
        beside = stop.running_beside(lay)
        click.echo(f"no run named {cfg.run_name} in {lay.run_dir.parent}: nothing to stop"
                   + (f"; {'; '.join(beside)}" if beside else ""))
        return
    say = hints.for_run(bool(rehearsal.is_rehearsal(lay)))  # a rehearsal's hints name its own commands
    running = lock.live_holder(lay.lock) is not None
    try:
        finished = not running and position.position(lay, cfg.ROUNDS, cfg.BASELINE_VAL).finished
    except ToolkitError:
        finished = False
    for line in stop.stop_run(lay, ray_temp_dir=cfg.ray_temp_dir, grace=cfg.STOP_GRACE, stop_job=_stop_job(cfg, lay),
                                 progress=click.echo, mark=not finished):
        click.echo(line)
    if finished:
        click.echo(f"run {cfg.run_name} had finished: nothing to stop, and no stop recorded")
        return
    click.echo(say(f"run {cfg.run_name} stopped; continue it with `make resume`"))
    if not running:
        for line in stop.running_beside(lay):
            click.echo(f"note: {line}")


@run.command("cleanup")
def run_cleanup():
    """Stop the slime job, every recorded service (reverse order) and Ray's stragglers: the
    driver's exit path, and `make resume`'s first step for what a killed driver left running.

    \b
    Example:
      pyhelpers run cleanup
    """

    cfg, lay = ctx()
    for line in stop.cleanup(lay, ray_temp_dir=cfg.ray_temp_dir, grace=cfg.STOP_GRACE, stop_job=_stop_job(cfg, lay)):
        click.echo(stamp("cleanup", line), err=True)


@run.command("rehearsal-reset")
@click.option("--check", "check_only", is_flag=True,
              help="Only refuse what the reset would refuse (a real run, real checkpoints); change nothing.")
def run_rehearsal_reset(check_only):
    """Before a fresh `make rehearse`: delete the previous rehearsal of RUN_NAME (only files
    marked as a rehearsal's; refuses real checkpoints and real runs). Only for the driver that
    holds the run lock (bin/train, our parent): the lock file stays, and nobody else's run is touched.

    \b
    Example:
      RUN_NAME=rehearsal pyhelpers run rehearsal-reset   (from bin/train, holding the lock)
    """

    cfg, lay = ctx()
    if check_only:
        rehearsal.fresh(lay, dry_run=True)
        return
    holder = lock.live_holder(lay.lock)
    if not holder or holder["pid"] != os.getppid():
        raise lock.refusal(lay.lock) if holder else ToolkitError(
            "the previous rehearsal is removed only by the driver that holds its lock", str(lay.lock),
            "run `make rehearse`")
    if rehearsal.is_rehearsal(lay) is False:
        raise ToolkitError(f"RUN_NAME={cfg.run_name} is a real run, not a rehearsal", str(lay.manifest),
                           "give the rehearsal its own RUN_NAME (default: rehearsal)")
    if lay.run_dir.is_dir():  # a killed earlier rehearsal may have left services running
        stop.cleanup(lay, ray_temp_dir=cfg.ray_temp_dir, grace=cfg.STOP_GRACE, stop_job=_stop_job(cfg, lay))

    for p in rehearsal.fresh(lay):
        click.echo(stamp("rehearse", f"removed the previous rehearsal's {p}"), err=True)


@run.command("rehearsal-inputs")
def run_rehearsal_inputs():
    """Before `make rehearse` swaps in its stand-ins: check the user's own SEED_BANK, TRAIN_TASKS
    and VAL_TASKS (what the real run will read); exit 1 naming the file and the field.

    \b
    Example:
      pyhelpers run rehearsal-inputs
    """


    cfg, _ = ctx()
    results, notes = rehearsal.user_inputs(cfg, dict(os.environ))
    for r in results:
        echo_err(stamp("rehearse", f"your inputs: {r.line()}"))
        if r.status == "FAIL" and len(r.details) > 1:
            for d in r.details:
                echo_err(stamp("rehearse", f"      | {d}"))
    for note in notes:
        echo_err(stamp("rehearse", f"your inputs: note: {note}"))
    if any(r.status == "FAIL" for r in results):
        raise click.ClickException("your inputs fail the checks above; the real run would fail on them too: "
                                   "fix them before rehearsing")


@run.command("summary")
def run_summary():
    """The finished run in a few lines: val success per round and the final bank.

    \b
    Example:
      pyhelpers run summary
    """

    cfg, lay = ctx()
    for line in status.summary_lines(cfg, lay):
        click.echo(line)


@run.command("status")
@click.option("--json", "as_json", is_flag=True, help="One JSON object, for machines.")
def run_status(as_json):
    """Where the run stands: driver, round and stage, training step, services (pids, ports, logs),
    disk free vs the next save, val/gate results, restarts, logs. Read-only.

    \b
    Example:
      pyhelpers run status
    """


    cfg, lay = ctx()
    st = status.gather(cfg, lay)
    if as_json:
        click.echo(json.dumps(st, indent=1, sort_keys=True, default=str))
        return
    for line in status.render(st):
        click.echo(line)


@run.command("logs")
@click.option("--service", default="", help="Whose log (e.g. driver, shopsim, slime, ray-head, eval-server, analyst, convert) "
              "or a stage's (train, export, evaluate).")
@click.option("--lines", "-n", type=click.IntRange(min=0), default=40, show_default=True)
@click.option("--follow", "-f", is_flag=True, help="Keep printing as the log grows (tail -F) until Ctrl-C.")
def run_logs(service, lines, follow):
    """The tail of a service's log (--follow: and what it writes next); without --service, which
    logs the run has, with their sizes and ages.

    \b
    Example:
      pyhelpers run logs --service shopsim -n 100 --follow
    """


    _, lay = ctx()
    logs = sorted(lay.logs.glob("*.log")) if lay.logs.is_dir() else []
    if not service:
        if not logs:
            click.echo(f"no logs yet in {lay.logs}")
            return
        click.echo(f"logs of run {lay.run_dir.name} in {lay.logs}:")
        now = time.time()
        for p in logs:
            st = p.stat()
            click.echo(f"  {p.stem:<16} {_size(st.st_size):>9}  written {_age(now - st.st_mtime)} ago")
        click.echo("one of them: make logs SERVICE=<name> [LINES=200] [FOLLOW=1]")
        return
    alias = {"slime": "slime-log.log", "job": "slime-log.log", "ray": "ray-head.log", "eval": "eval-server.log",
             **{s.name: s.log for s in (stages.BASELINE, *stages.ROUND) if s.log}}  # a stage: its log
    path = lay.logs / alias.get(service, f"{service}.log")
    if not path.is_file():
        raise ToolkitError(f"no log named {path.name}", str(lay.logs),
                           f"choose one of: {', '.join(p.stem for p in logs) or '(none yet)'}")
    if follow:
        # tail is our child, not exec'd: Ctrl-C is how one leaves, so it ends here quietly (exit
        # 0) instead of tail dying of SIGINT, which make reports as "*** [logs] Interrupt".
        tail = subprocess.Popen(["tail", "-n", str(lines), "-F", str(path)])
        try:
            tail.wait()
        except KeyboardInterrupt:
            tail.wait()
            return
        raise SystemExit(tail.returncode)
    click.echo(f"--- {path} (last {lines} lines) ---")
    for line in groups.log_tail(path, lines):
        click.echo(line)


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _age(s: float) -> str:
    s = max(0, int(s))
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    return f"{s // 3600} h" if s < 172800 else f"{s // 86400} days"


@run.command("watch")
@click.option("--interval", type=click.FloatRange(min=0.5), default=3.0, show_default=True,
              help="Seconds between refreshes.")
@click.option("--count", type=click.IntRange(min=1), help="Stop after this many refreshes (default: until Ctrl-C).")
def run_watch(interval, count):
    """`make status`, refreshed every few seconds until Ctrl-C. On a terminal the screen is
    redrawn in place; otherwise each refresh is printed after a separator line.

    \b
    Example:
      pyhelpers run watch --interval 5
    """


    cfg, lay = ctx()
    tty = sys.stdout.isatty()
    try:
        for n in itertools.count(1):
            lines = status.render(status.gather(cfg, lay))
            foot = f"{time.strftime('%H:%M:%S')}  refreshed every {interval:g} s; Ctrl-C to leave"
            if tty:
                click.echo("\033[H\033[2J" + "\n".join(lines) + "\n\n" + foot, nl=True)
            else:
                click.echo("\n".join([f"--- {foot}", *lines]))
            if count and n >= count:
                return
            time.sleep(interval)
    except KeyboardInterrupt:
        click.echo("")


@run.command("plan", context_settings={"ignore_unknown_options": True})
@click.argument("model_args", nargs=-1, type=click.UNPROCESSED)
def run_plan(model_args):
    """What `make train` / `make resume` would do: resume point, stages left, every command line
    (secrets masked; none is ever on a command line), disk arithmetic, opened addresses. Changes
    nothing. MODEL_ARGS: the flags of slime's model script, when bin/plan could source it.

    \b
    Example:
      pyhelpers run plan
    """

    # Like `sky launch --dryrun`: the plan even when the configuration has errors, every error
    # first, and the run refused (exit 1) until they are fixed.
    cfg = load.load()
    errors = [p for p in check(cfg) if p.level == "error"]
    if errors:
        click.echo(f"configuration: {len(errors)} error(s); make train refuses to start until they are fixed "
                   f"(in {cfg.env_file} or on the make command line):")
        for p in errors:
            click.echo(f"  {p}")
        click.echo("the plan with the configuration as it stands:")
    try:
        for line in plan.plan(cfg, from_config(cfg), list(model_args) or None):
            click.echo(line)
    except Exception as exc:  # noqa: BLE001 - a bad knob may stop the plan part-way: say where, keep the errors
        if not errors:
            raise
        click.echo(f"  (the plan stops here: {type(exc).__name__}: {exc})")
    if errors:
        raise click.ClickException(f"{len(errors)} configuration error(s), listed first above: the run is refused")


@run.command("wandb-sync")
@click.option("--dry-run", is_flag=True, help="List what would be uploaded; upload nothing.")
def run_wandb_sync(dry_run):
    """Upload the run's offline W&B runs (runs/<RUN>/wandb) with `wandb sync`, skipping those
    already synced. The key comes from WANDB_API_KEY (.env) or ~/.netrc through the environment.

    \b
    Example:
      pyhelpers run wandb-sync --dry-run
    """


    cfg, lay = ctx()
    todo = sync.pending(lay.run_dir)
    done = len(sync.offline_runs(lay.run_dir)) - len(todo)
    click.echo(f"{len(todo)} offline W&B run(s) to upload, {done} already synced ({lay.wandb_dir})")
    for p in todo:
        click.echo(f"  {p.relative_to(lay.run_dir)}")
    if dry_run or not todo:
        return

    if not cfg.WANDB_API_KEY and not netrc_has(os.environ.get("HOME", ""), "api.wandb.ai"):
        raise ToolkitError("no W&B key: WANDB_API_KEY is not set and ~/.netrc has no api.wandb.ai entry",
                           str(cfg.env_file), "set WANDB_API_KEY (your W&B key) in .env, or run `wandb login`; then run this again")
    env = {**os.environ, "WANDB_MODE": "online"}
    if cfg.WANDB_API_KEY:
        env["WANDB_API_KEY"] = cfg.WANDB_API_KEY
    wandb_cli = str(Path(sys.executable).with_name("wandb"))
    done = subprocess.run([wandb_cli, "sync", *map(str, todo)], env=env)
    if done.returncode != 0:
        raise ToolkitError(f"wandb sync failed (exit {done.returncode}); its output is above", str(lay.wandb_dir),
                           "check the network (AutoDL: turn on the network proxy) and the key; running "
                           "`make wandb-sync` again uploads only what is left")
    click.echo(f"uploaded {len(todo)} run(s)")


@run.command("convert-base", context_settings={"ignore_unknown_options": True})
@click.argument("model_args", nargs=-1, type=click.UNPROCESSED)
def run_convert_base(model_args):
    """HF_MODEL -> TORCH_DIST_MODEL with slime's converter (M18; needs the GPUs): staged in
    <TORCH_DIST_MODEL>.partial, verified, renamed. MODEL_ARGS: the flags of slime's model script.

    \b
    Example:
      pyhelpers run convert-base -- "${MODEL_ARGS[@]}"
    """

    cfg, _ = ctx()
    log = cfg.MODELS_DIR / "convert-base.log"
    convert_base.convert(cfg, list(model_args), log, progress=echo_err)


@run.command("report")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="Directory [default: RUN_DIR/report].")
def run_report(out):
    """Write the run's report: index.html with PNG plots (val per round, gate forest plot, SkillBank,
    training curves, stage timeline) and the CSVs behind them, from the run's own files.

    \b
    Example:
      pyhelpers run report
    """


    cfg, lay = ctx()
    if not lay.manifest.is_file():
        raise ToolkitError(f"there is no run named {cfg.run_name}", str(lay.run_dir),
                           "set RUN_NAME to the run you mean (`ls " + str(lay.run_dir.parent) + "`)")
    page, seconds = report.build_timed(cfg, lay, out)
    click.echo(f"wrote {page} ({seconds:.1f} s)")
