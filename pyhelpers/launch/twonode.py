"""`make rehearse NNODES=2` (docs/multinode.md §8): the whole rehearsal on a real two-node Ray cluster on
this host. Two network namespaces joined by a veth pair (procs/netns.py, TEST-NET-2 addresses): the
head's rehearsal (bin/rehearse, as on a head: NODE_ADDR, NET_IFACE of its namespace) in one, a
worker's `make join` in the other, with the run's token by path through the shared run dir (the two
"machines" share this host's files, as NFS would share them). When the head's rehearsal ends, the
worker leaves and both namespaces are removed, whatever happened.

The pair and this process (its owner) are recorded in RUNS_DIR/.rehearsal/twonode.json before
anything starts in it. A killed owner cannot remove its pair: `make stop REHEARSAL=1` and the next
`make rehearse NNODES=2` (RESUME=1 or not) reclaim what the record names (`reclaim`); a second one
while the owner lives is refused.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from pyhelpers.errors import ToolkitError
from pyhelpers.jsonfiles import load_json_or_none, write_json_atomic
from pyhelpers.procs import netns, procfs


def _relay(stream, prefix: str) -> None:
    for line in iter(stream.readline, ""):
        sys.stderr.write(prefix + line)
    stream.close()


def record_path(runs_dir: Path) -> Path:
    # (bin/rehearse --env looks for this file, as $REHEARSAL_DIR/twonode.json, before it asks Python)
    return runs_dir / ".rehearsal" / "twonode.json"


def live_head_namespace(runs_dir: Path) -> str | None:
    """The head's network namespace of a two-node rehearsal that is running now, else None. Its
    services listen on the namespace's own loopback, which this host's loopback does not reach:
    `make status REHEARSAL=1` and the other --env commands run inside it (bin/rehearse)."""
    rec = load_json_or_none(record_path(runs_dir)) or {}
    ns = (rec.get("head") or {}).get("ns")
    return ns if ns and (netns.NETNS_DIR / ns).exists() else None


def _owner_alive(rec: dict) -> bool:
    owner = rec.get("owner") or {}
    return bool(owner) and owner.get("host") == procfs.hostname() and procfs.is_alive(owner["pid"], owner["start_ticks"])


def reclaim(runs_dir: Path, grace: float, echo: Callable[[str], None]) -> None:
    """Remove what the record names, whether its owner lives or not: every process still inside its
    two namespaces, the namespaces, their mounts and the veth pair (netns.Pair.remove)."""
    rec = load_json_or_none(record_path(runs_dir))
    if not rec or "head" not in rec:
        return
    pair = netns.Pair.from_record(rec)
    if not pair.exists():
        return
    why = "" if _owner_alive(rec) else f" (left by a killed rehearsal, pid {(rec.get('owner') or {}).get('pid', '?')})"
    echo(f"two-node rehearsal: removing its namespaces {pair.head.ns} and {pair.worker.ns}{why}")
    for line in pair.remove(grace):
        echo(f"  {line}")


def _take_over(runs_dir: Path, grace: float) -> None:
    """Before a new pair: refuse while the recorded rehearsal's owner runs; reclaim a killed one's."""
    rec = load_json_or_none(record_path(runs_dir)) or {}
    if rec.get("head") and _owner_alive(rec):
        raise ToolkitError(f"a two-node rehearsal is running (pid {rec['owner']['pid']}, namespaces "
                           f"{rec['head']['ns']}, {rec['worker']['ns']})", str(record_path(runs_dir)),
                           "wait for it, or stop it: make stop REHEARSAL=1")
    reclaim(runs_dir, grace, lambda line: sys.stderr.write(line + "\n"))


def run(root: Path, runs_dir: Path, args: list[str], grace: float) -> int:
    rehearse = str(root / "bin" / "rehearse")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # (so that the namespaces are removed below)
    _take_over(runs_dir, grace)
    pair = netns.Pair.create()
    base = {**os.environ, "NNODES": "2"}
    head_env = {**base, "SHOPSIMRL_NODE_ROLE": "head", "NODE_ADDR": pair.head.addr, "NET_IFACE": pair.head.iface}
    worker_env = {**base, "SHOPSIMRL_NODE_ROLE": "worker", "NODE_ADDR": pair.worker.addr,
                  "NET_IFACE": pair.worker.iface, "HEAD_ADDR": pair.head.addr}
    record = record_path(runs_dir)
    owner = {"pid": os.getpid(), "start_ticks": procfs.start_ticks(os.getpid()), "host": procfs.hostname()}
    try:
        write_json_atomic(record, {**pair.record(), "owner": owner})
    except BaseException:
        pair.remove(grace)
        raise
    sys.stderr.write(f"two-node rehearsal: head {pair.head.addr} ({pair.head.ns}), worker {pair.worker.addr} "
                     f"({pair.worker.ns}), joined by a veth pair\n")
    worker = head = None
    try:
        head = subprocess.Popen(pair.head.exec_argv([rehearse, *args]), env=head_env)
        worker = subprocess.Popen(pair.worker.exec_argv([rehearse, "--env", str(root / "bin" / "join")]),
                                  env=worker_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        relay = threading.Thread(target=_relay, args=(worker.stdout, "worker | "), daemon=True)
        relay.start()
        rc = head.wait()
        if worker.wait() != 0:
            sys.stderr.write(f"two-node rehearsal: the worker's `make join` failed (exit {worker.returncode})\n")
            rc = rc or 1
        return rc
    finally:
        for proc in (head, worker):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=120)
        subprocess.run(pair.worker.exec_argv([rehearse, "--env", str(root / "bin" / "leave")]), env=worker_env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        pair.remove(grace)
