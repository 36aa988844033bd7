"""`make rehearse NNODES=2` (docs/multinode.md §8): the whole rehearsal on a real two-node Ray cluster on
this host. Two network namespaces joined by a veth pair (procs/netns.py, TEST-NET-2 addresses): the
head's rehearsal (bin/rehearse, as on a head: NODE_ADDR, NET_IFACE of its namespace) in one, a
worker's `make join` in the other, with the run's token by path through the shared run dir (the two
"machines" share this host's files, as NFS would share them). When the head's rehearsal ends, the
worker leaves and both namespaces are removed, whatever happened.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from pyhelpers.jsonfiles import load_json_or_none, write_json_atomic
from pyhelpers.procs import netns


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
    return ns if ns and (Path("/run/netns") / ns).exists() else None


def run(root: Path, runs_dir: Path, args: list[str]) -> int:
    rehearse = str(root / "bin" / "rehearse")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # (so that the namespaces are removed below)
    pair = netns.Pair.create()
    base = {**os.environ, "NNODES": "2"}
    head_env = {**base, "SHOPSIMRL_NODE_ROLE": "head", "NODE_ADDR": pair.head.addr, "NET_IFACE": pair.head.iface}
    worker_env = {**base, "SHOPSIMRL_NODE_ROLE": "worker", "NODE_ADDR": pair.worker.addr,
                  "NET_IFACE": pair.worker.iface, "HEAD_ADDR": pair.head.addr}
    record = record_path(runs_dir)
    record.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(record, {"head": {"ns": pair.head.ns, "addr": pair.head.addr, "iface": pair.head.iface},
                               "worker": {"ns": pair.worker.ns, "addr": pair.worker.addr, "iface": pair.worker.iface}})
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
        pair.remove()
