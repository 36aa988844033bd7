"""The ray-worker service's own process (make join): keeps the worker's node agent running.
`python -m pyhelpers.launch.node_keeper` (docs/multinode.md §5, §10).

The node agent (node_agent.py) heals the worker's Ray node; nothing healed the agent. Killed (the OOM
killer, a stray `kill -9`), it left its `ray start --block` and raylet running unwatched: no stop
marker read (the run's end left the worker's Ray up), no heartbeat (`make status` said the worker
went silent), no rejoin after the head's next lost Ray. The keeper runs the agent as its child, in
the service's process group (so `make leave`'s TERM reaches the agent, and through it Ray, as
before), and is the group's subreaper: what a killed agent leaves is handed to the keeper.

When the agent dies of a signal it was not sent by the keeper's own stop, the keeper ends all that
the agent left (its Ray node, which the head counts as a lost node and waits JOIN_TIMEOUT for), then
starts the agent again, which joins the head on its own. At most AGENT_RESTARTS times: an agent
killed again and again is something to read in the log, not to hide. The agent's own end (the run
stopped, `make leave`, the head gone, a start that kept failing) is the keeper's end, with its
status. The keeper itself is not watched by anything: on a real cluster `make join` can be run by
the machine's service manager (docs/multinode.md §5).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable

from pyhelpers.config.load import load
from pyhelpers.launch.node_agent import MARKERS_ENV, RESTARTS_ENV, marker_versions, stop_watch
from pyhelpers.procs import family
from pyhelpers.run.layout import from_config

AGENT_RESTARTS = 3


def keep(argv: list[str], env: dict[str, str], *, grace: float, stop_reason: Callable[[], str | None],
         restarts: int = AGENT_RESTARTS, markers: dict | None = None) -> int:
    """Run the agent `argv` until it ends on its own (its exit status is returned), starting it again
    after a death by a signal the keeper did not pass on, at most `restarts` times, never once
    `stop_reason()` names a stop. A TERM or INT to the keeper is passed on to the agent, whose own
    stop then ends its Ray; the keeper waits for it."""
    family.become_subreaper()
    asked: list[int] = []
    child: list[subprocess.Popen] = []

    def pass_on(signum, frame):
        asked.append(signum)
        if child and child[0].poll() is None:
            child[0].send_signal(signum)

    signal.signal(signal.SIGTERM, pass_on)
    signal.signal(signal.SIGINT, pass_on)
    extra = {MARKERS_ENV: json.dumps(markers)} if markers is not None else {}
    n = 0
    while True:
        proc = subprocess.Popen(argv, env={**env, **extra, RESTARTS_ENV: str(n)})
        child[:] = [proc]
        rc = proc.wait()
        left = family.stop_rest_of_my_family(grace, "left by the killed node agent")
        family.reap_adopted()
        if rc >= 0 or asked:
            return rc if rc >= 0 else 0
        why = stop_reason()
        if why or n >= restarts:
            print(f"the node agent was killed (signal {-rc}); not started again: "
                  + (why or f"killed {n + 1} times (AGENT_RESTARTS={restarts}); `make join` starts it again"),
                  flush=True)
            return 1
        n += 1
        print(f"the node agent was killed (signal {-rc}): ending what it left, then starting it again "
              f"({n} of {restarts})", flush=True)
        for r in left:
            print(r.message, flush=True)


def main() -> int:
    cfg = load()
    lay = from_config(cfg)
    markers = marker_versions(lay, cfg.NODE_ADDR)
    stop_reason = stop_watch(lay, cfg.NODE_ADDR, before=markers)
    return keep([sys.executable, "-m", "pyhelpers.launch.node_agent"], dict(os.environ), grace=cfg.STOP_GRACE,
                stop_reason=stop_reason, markers=markers)


if __name__ == "__main__":
    sys.exit(main())
