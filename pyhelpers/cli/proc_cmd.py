"""`pyhelpers proc start|stop|status|wait|hold-lock`: process groups, readiness, the run lock."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path

import click

from pyhelpers.config import load
from pyhelpers.procs import family, groups, ports, ready
from pyhelpers.run import lock

_dir = click.Path(file_okay=False, path_type=Path)


def _knob(value: float | None, name: str) -> float:
    """An explicit option wins; else the configured knob (read here, at the edge)."""
    if value is not None:
        return value

    return load.load().float(name)


@click.group()
def proc():
    """Services in their own process groups: start, stop, wait until ready; the run lock."""


@proc.command("start", context_settings={"ignore_unknown_options": True})
@click.option("--pids-dir", type=_dir, required=True, help="Where NAME.json is written.")
@click.option("--logs-dir", type=_dir, required=True, help="Where NAME.log is appended to.")
@click.option("--name", required=True, help="Service name (letters, digits, . _ -).")
@click.option("--needs-port", "needs", multiple=True, metavar="HOST:PORT",
              help="Refuse to start unless this address can be bound (names the holder).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def proc_start(pids_dir, logs_dir, name, needs, command):
    """Start COMMAND in its own session; write its pidfile; print its pid (== process group id).

    \b
    Example:
      pyhelpers proc start --pids-dir runs/r/pids --logs-dir runs/r/logs --name shopsim \\
        --needs-port 127.0.0.1:5700 -- python -m shop_env.pack_api
    """
    addrs = [ports.parse_hostport(a, "--needs-port") for a in needs]
    rec = groups.start(name, list(command), pids_dir=pids_dir, logs_dir=logs_dir, needs_ports=addrs)
    click.echo(rec.pid)


@proc.command("stop")
@click.option("--pids-dir", type=_dir, required=True)
@click.option("--name", "names", multiple=True, help="Service to stop (repeatable).")
@click.option("--all", "all_", is_flag=True, help="Every recorded service, in reverse start order.")
@click.option("--grace", type=float, help="Seconds between TERM and KILL [default: STOP_GRACE].")
@click.option("--dry-run", is_flag=True, help="Say what would be stopped; signal nothing.")
@click.option("--missing-ok", is_flag=True, help="Skip a --name that was never started (no pidfile).")
def proc_stop(pids_dir, names, all_, grace, dry_run, missing_ok):
    """Stop recorded services that are still ours: TERM the group, KILL it after the grace.

    A pid now used by another process (start time differs) is left alone. Exit 1 if a group
    survived KILL.

    \b
    Example:
      pyhelpers proc stop --pids-dir runs/r/pids --all --grace 20
    """
    if bool(names) == all_:
        raise click.UsageError("give --name NAME (repeatable) or --all")
    results = groups.stop_all(pids_dir, _knob(grace, "STOP_GRACE"), names=None if all_ else names, dry_run=dry_run, missing_ok=missing_ok)
    for r in results:
        click.echo(r.message)
    if not results:
        click.echo(f"no services recorded in {pids_dir}")
    if any(r.outcome == "stuck" for r in results):
        raise click.ClickException("a process group survived KILL (see above)")


@proc.command("status")
@click.option("--pids-dir", type=_dir, required=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON list, for machines.")
def proc_status(pids_dir, as_json):
    """List recorded services: name, pid, alive/dead/reused/other-host, age, log.

    \b
    Example:
      pyhelpers proc status --pids-dir runs/r/pids
    """
    rows = groups.status(pids_dir)
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    if not rows:
        click.echo(f"no services recorded in {pids_dir}")
    for r in rows:
        age = f"{r['age_s']:.0f}s" if r["age_s"] is not None else "-"
        click.echo(f"{r['name']:<16} {r['pid']:>8}  {r['state']:<10} {age:>8}  {r['log']}")


@proc.command("wait", context_settings={"ignore_unknown_options": True})
@click.option("--pids-dir", type=_dir, required=True)
@click.option("--name", required=True)
@click.option("--timeout", type=float, required=True, help="Deadline in seconds.")
@click.option("--backoff-max", type=float, help="Longest pause between probes [default: READY_BACKOFF_MAX].")
@click.option("--knob", default="", help="The timeout's knob, named in the fix (e.g. SGLANG_START_TIMEOUT).")
@click.option("--http", "url", help="Ready when GET URL answers --expect-status.")
@click.option("--expect-status", type=int, default=200, show_default=True)
@click.option("--tcp", "tcp", metavar="HOST:PORT", help="Ready when a TCP connect succeeds.")
@click.option("--cmd", "use_cmd", is_flag=True, help="Ready when the COMMAND after -- exits 0.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def proc_wait(pids_dir, name, timeout, backoff_max, knob, url, expect_status, tcp, use_cmd, command):
    """Wait until service NAME answers; exit 1 with its log's tail if it dies or times out.

    \b
    Example:
      pyhelpers proc wait --pids-dir runs/r/pids --name eval --timeout 900 \\
        --knob SGLANG_START_TIMEOUT --http http://127.0.0.1:30000/health
      pyhelpers proc wait --pids-dir runs/r/pids --name x --timeout 5 --cmd -- test -e ready
    """
    if sum(map(bool, (url, tcp, use_cmd))) != 1 or bool(command) != use_cmd:
        raise click.UsageError("give exactly one probe: --http URL, --tcp HOST:PORT or --cmd -- COMMAND...")
    if url:
        probe = ready.http_probe(url, expect_status)
    elif tcp:
        probe = ready.tcp_probe(*ports.parse_hostport(tcp, "--tcp"))
    else:
        probe = ready.cmd_probe(list(command))
    try:
        took = ready.wait_service(pids_dir, name, probe, timeout=timeout,
                                  backoff_max=_knob(backoff_max, "READY_BACKOFF_MAX"), knob=knob)
    except ready.NotReady as exc:
        click.echo(f"--- last {len(exc.log_tail)} lines of the log of {name} ---", err=True)
        for line in exc.log_tail:
            click.echo(line, err=True)
        click.echo("---", err=True)
        raise click.ClickException(str(exc)) from None
    click.echo(f"{name}: ready after {took:.1f} s")


@proc.command("hold-lock")
@click.option("--lock", "lock_path", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--holder-pid", type=int, required=True, help="The driver's pid ($$), recorded as the holder.")
def proc_hold_lock(lock_path, holder_pid):
    """Take the run lock for the driver and hold it until TERM, or until the driver dies (the
    kernel then kills this process: PR_SET_PDEATHSIG). Prints `locked` once held; exit 1 naming the
    holder when another driver has it. Run by take_run_lock (bin/lib.sh) as a coprocess.

    \b
    Example:
      coproc LOCK { exec pyhelpers proc hold-lock --lock runs/r/lock --holder-pid $$; }
    """

    family.die_with_parent()
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: done.set())
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    note = lock.take(fd, lock_path, holder_pid)
    if note:
        click.echo(note, err=True)
    click.echo("locked")
    sys.stdout.flush()
    done.wait()
    os.ftruncate(fd, 0)  # an orderly release: no holder recorded
    os.close(fd)
