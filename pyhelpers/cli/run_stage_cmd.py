"""`pyhelpers run loop|service|log-wandb`: the training loop (pyhelpers/loop/loop.py) and
the services and the job it starts."""

from __future__ import annotations

import os
import traceback

import click

from pyhelpers import report
from pyhelpers.cli.common import ctx, echo_err
from pyhelpers.config.load import Config
from pyhelpers.errors import Stopped, ToolkitError
from pyhelpers.launch import secret_env, services
from pyhelpers.loop import loop
from pyhelpers.loop.console import Console
from pyhelpers.overview import rehearsal, status
from pyhelpers.procs import family, procfs, ready
from pyhelpers.run import events, hints
from pyhelpers.stages import NAMES, progress


@click.group()
def run():
    """Where the run stands and what the driver does next."""


@run.command("loop", context_settings={"ignore_unknown_options": True})
@click.option("--stop-before", type=click.Choice(NAMES),
              help="End when this stage is next (make smoke stops before compile).")
@click.argument("model_args", nargs=-1, type=click.UNPROCESSED)
def run_loop(stop_before, model_args):
    """The training loop (pyhelpers/loop/loop.py): derive the next stage from the artifacts, run it,
    repeat until the run is done; then log what W&B still lacks and print the summary. Run by
    bin/train as its child (dies with it); MODEL_ARGS are the flags of slime's model script.
    Exit 0 done, 1 a stage failed (the reason on stderr), 143/130 stopped.

    \b
    Example:
      pyhelpers run loop -- "${MODEL_ARGS[@]}"
    """
    family.die_with_parent()
    loop.install_signal_handlers()
    cfg, lay = ctx()
    os.environ.update(cfg.process_env())  # what bin/train's shell exported before: for the children
    secret_env.drop_all(cfg)  # a key the shell exported is ours alone now: only its users get it (at spawn)
    # From here on library output (transformers, wandb, Ray) goes to logs/driver.log only.
    console = Console.take_over(lay.logs / "driver.log", rewrite=hints.for_run(bool(rehearsal.is_rehearsal(lay))))
    say = console.say
    stream = console.stream(on_line=progress.publisher(lay.run_dir))
    try:
        end = loop.Loop(cfg=cfg, lay=lay, model_args=list(model_args), echo=say, status=console.status,
                        progress_stream=stream).run(stop_before)
        if end == "stopped-before":
            say(f"stopping before {stop_before}, as asked")
            return
        for line in services.log_wandb(cfg, lay):
            say(line)
        _final_report(cfg, lay, say)
        for line in status.summary_lines(cfg, lay):
            say(line)
    except Stopped as exc:
        console.status("")
        say(f"stopped ({exc})")
        raise SystemExit(130 if str(exc) == "SIGINT" else 143) from None
    except ToolkitError as exc:  # the reason goes to the terminal, not only to the log
        console.status("")
        say(f"Error: {exc}")
        raise SystemExit(1) from None
    except Exception as exc:  # a bug: its traceback goes to the log, a line saying so to the terminal

        traceback.print_exc()
        console.status("")
        say(f"Error: {type(exc).__name__}: {exc} (traceback in {lay.logs / 'driver.log'})")
        raise SystemExit(1) from None


def _final_report(cfg: Config, lay, say) -> None:
    services.stop(cfg, lay, "report")  # a round's background report: this one supersedes it
    try:
        say(f"report: {report.build_timed(cfg, lay)[0]}")
    except Exception as exc:  # noqa: BLE001 - the report never fails a finished run
        say(f"report not written ({type(exc).__name__}: {exc}); `make report` tries again")


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
    """

    cfg, lay = ctx()
    try:
        echo_err(services.ensure(cfg, lay, name, model=model, round_=round_, progress=echo_err))
    except ready.NotReady as exc:
        echo_err(f"--- last {len(exc.log_tail)} lines of the log of {name} ---")
        echo_err("\n".join(exc.log_tail))
        raise


@run.command("log-wandb")
def run_log_wandb():
    """Log what is not logged yet to W&B, once: each finished round's val and gate, and the
    analyst's final counters (log-once markers in RUN_DIR/wandb/logged). Runs in the background
    after each evaluation and once more at the run's end; two at a time wait for each other.

    \b
    Example:
      pyhelpers run log-wandb
    """
    # lazy: tracking.pending (evaluate.round, wandb_log: ~105 ms) only for this command
    from pyhelpers.overview import wandb_pending as wandb_pending

    cfg, lay = ctx()
    for line in wandb_pending.log_all(cfg, lay):
        echo_err(line)
    # its time since this process started (the driver waits for all of it at the run's end), for
    # the ETA of that last logging (stages/progress.py END_OF_RUN)
    took = procfs.age_seconds(procfs.start_ticks(os.getpid()) or 0)
    events.append(lay.run_dir, "wandb-logged", seconds=round(took, 3))
