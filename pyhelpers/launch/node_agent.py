"""A worker's Ray node, supervised (make join, docs/multinode.md §5): `python -m pyhelpers.launch.node_agent`.

Started by `pyhelpers node join` as the ray-worker service (own process group, pidfile and log under
runs/<RUN>/nodes/<NODE_ADDR>/), it runs `ray start --block` (launch/slime_args.ray_worker) in its group
and watches two things every second while it runs:
- the run's stop marker (runs/<RUN>/stopped, in the shared run dir): `make stop` on the head writes it,
  and the head cannot signal another machine's processes, so the worker stops its own Ray;
- its own heartbeat, runs/<RUN>/nodes/<NODE_ADDR>/node.json (rewritten every few seconds), which
  `make status` on any node reads to list the nodes.
It ends when its Ray node ends (the head's GCS gone, a killed raylet), when the run is stopped, or on
TERM (`make leave`): TERM to its Ray node, STOP_GRACE, then the group's stop does the rest.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from pyhelpers.config.load import load
from pyhelpers.jsonfiles import write_json_atomic
from pyhelpers.launch import cluster, node_env
from pyhelpers.run.layout import from_config

HEARTBEAT = 2.0


def main() -> int:
    cfg = load()
    lay = from_config(cfg)
    mine = cluster.node_dir(lay, cfg.NODE_ADDR)
    started = time.time()
    dropped = {"RAY_AUTH_TOKEN", *node_env.dropped(cfg)}  # a shell's token would replace the run's; proxies
    env = {**{k: v for k, v in os.environ.items() if k not in dropped}, **cluster.worker_env(cfg, lay)}
    child = subprocess.Popen(cluster.worker_argv(cfg), env=env)
    stopping = []

    def on_term(signum, frame):
        stopping.append(signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    info = {"addr": cfg.NODE_ADDR, "iface": cfg.NET_IFACE, "gpus": cfg.NUM_GPUS,
            "head": cfg.HEAD_ADDR, "pid": os.getpid(), "started": started}
    beat = 0.0
    while child.poll() is None:
        now = time.time()
        if now - beat >= HEARTBEAT:
            write_json_atomic(mine / "node.json", {**info, "heartbeat": now})
            beat = now
        marker = lay.stopped_marker
        stopped = marker.exists() and marker.stat().st_mtime > started
        if stopping or stopped:
            print(f"stopping this worker's Ray node ({'the run was stopped' if stopped else 'make leave'})", flush=True)
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=cfg.STOP_GRACE)
            except subprocess.TimeoutExpired:
                child.kill()
            break
        time.sleep(0.5)
    rc = child.wait()
    write_json_atomic(mine / "node.json", {**info, "heartbeat": time.time(), "ended": time.time(), "exit": rc})
    print(f"the Ray worker node ended (exit {rc})", flush=True)
    return 0 if stopping or rc in (0, -signal.SIGTERM) else 1


if __name__ == "__main__":
    sys.exit(main())
