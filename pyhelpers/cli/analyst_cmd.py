"""`pyhelpers analyst run`: the Failure Analyst sidecar (docs/analyst.md)."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path

import click

from pyhelpers.analyst import logs
from pyhelpers.analyst.stats import WandbOptions
from pyhelpers.config import load
from pyhelpers.errors import ToolkitError


@click.group()
def analyst():
    """The Failure Analyst: spool records -> analyst model -> candidate skills."""


@analyst.command("run")
@click.option("--round-dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The round's dir (runs/<run>/rounds/round-NNN) holding spool/.")
@click.option("--drain", is_flag=True,
              help="Process what is pending within ANALYST_DRAIN_TIMEOUT, then exit.")
@click.option("--wandb", "use_wandb", is_flag=True,
              help="Also log the counters to W&B (group WANDB_GROUP, job_type analyst).")
@click.option("--wandb-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="WANDB_DIR of the run [default: RUN_DIR/wandb].")
@click.option("--round", "round_no", type=int, default=None,
              help="Round number, when the dir is not named round-NNN.")
def run(round_dir, drain, use_wandb, wandb_dir, round_no):
    """Watch ROUND_DIR/spool/ and write ROUND_DIR/candidates/<batch_id>.json.

    Without --drain it runs until TERM/INT (exit 0, no partial output). The key comes from
    DASHSCOPE_API_KEY (.env or environment), never from the command line. Log lines go to
    stderr; the last line on stdout is a JSON summary.

    Exit codes: 0 stopped by TERM/INT, or drained with nothing left; 1 configuration problem;
    2 bad usage; 3 drain ended with records left (deadline, spend cap or outage; a later run
    picks them up); 4 the endpoint refuses every request (401/403/404/arrearage: key, region,
    account or model); 5 another analyst already runs on this round dir.

    \b
    Example:
      pyhelpers analyst run --round-dir runs/r1/rounds/round-000 2>>runs/r1/logs/analyst.log &
      pyhelpers analyst run --round-dir runs/r1/rounds/round-000 --drain --wandb
    """
    # lazy: analyst.sidecar (~68 ms) only for this command
    from pyhelpers.analyst import sidecar

    cfg = load.load()
    key = cfg.DASHSCOPE_API_KEY
    if not key:
        raise ToolkitError("DASHSCOPE_API_KEY is not set", cfg.sources.get("DASHSCOPE_API_KEY", ".env"),
                           f"put DASHSCOPE_API_KEY=sk-... in {cfg.env_file} (never on a command line), "
                           "or set ANALYST_ENABLED=0")
    # Held in memory from here: what this process starts (wandb's own processes) does not need it.
    os.environ.pop("DASHSCOPE_API_KEY", None)
    settings = sidecar.Settings.from_config(cfg, round_dir, round_no)

    logs.setup(key)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    opts = None
    if use_wandb:
        opts = WandbOptions(project=cfg.WANDB_PROJECT, group=cfg.WANDB_GROUP, mode=cfg.WANDB_MODE,
                            dir=Path(wandb_dir or cfg.derived()["WANDB_DIR"]),
                            run_id=f"{cfg.run_name}-analyst-r{settings.round:03d}", config=settings.public())
    outcome = sidecar.run(settings, key, stop=stop, drain=drain, wandb=opts)
    click.echo(json.dumps({"exit": outcome.code, "why": outcome.why, "left": outcome.left,
                           **{k: outcome.stats.get(k) for k in ("records_processed", "batches_ok",
                                                                 "batches_rejected", "proposals", "calls")}},
                          sort_keys=True))
    sys.exit(outcome.code)


@analyst.command("status")
@click.option("--round-dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The round's dir (runs/<run>/rounds/round-NNN).")
@click.option("--round", "round_no", type=int, default=None,
              help="Round number, when the dir is not named round-NNN.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object, for machines.")
def status(round_dir, round_no, as_json):
    """Show processed/pending/quarantined records, calls used and the next batches (read-only).

    \b
    Example:
      pyhelpers analyst status --round-dir runs/r1/rounds/round-000
    """
    # lazy: analyst.sidecar (~68 ms) only for this command
    from pyhelpers.analyst import sidecar

    st = sidecar.status(sidecar.Settings.from_config(load.load(), round_dir, round_no))
    if as_json:
        click.echo(json.dumps(st, indent=2, sort_keys=True))
        return
    click.echo(f"records: {st['records_processed']} processed, {st['records_pending']} pending, "
               f"{st['records_quarantined']} quarantined")
    click.echo(f"batches: {st['batches_ok']} ok, {st['batches_rejected']} rejected; "
               f"{st['proposals']} proposals; calls {st['calls']}/{st['max_calls']}")
    for name, reason in st["quarantined"].items():
        click.echo(f"quarantined {name}: {reason}")
    for b in st["next_batches"]:
        click.echo(f"next batch {b['batch_id']}: {', '.join(b['records'])}")
