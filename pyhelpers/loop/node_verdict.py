"""Did a multi-node job's failure take a worker's Ray with it? Asked of the placed workers' own agents
(loop.py), before an `engine` or `node` failure that nothing yet ties to a worker is restarted.

A worker's raylet killed under the job can end the job -- an ActorUnavailableError: the socket
closed, the connection reset or refused -- before anything else says the node went: Ray's GCS
lists the node ALIVE until its health check fails (tens of seconds), and the worker's agent starts
its Ray again only after a pause (node_agent.RETRY_PAUSE_S). Read at that moment, the failure looked
like the job's own, and the restart was the full one (every service, the head's Ray too) where
stopping the job and awaiting the node (`node-lost`) was the restart. So the loop asks, for at most
VERDICT_S:
- an agent that saw the job's start of its Ray end says so in its node.json (`ray_ended`, written
  the moment `ray start --block` ended, before its leftovers are stopped), or has started its Ray
  again (its generation changed, cluster.ray_generation): that worker is lost;
- an agent whose heartbeat changed twice since the question, with the job's start of its Ray still
  running, says that Ray outlived the failure: `ray start --block` looks at its processes every
  second (ray/scripts/scripts.py:1285-1286, 2.60.0) and the agent at `ray start` every half second,
  so a beat written a heartbeat (2 s) after the question comes after the raylet was seen alive
  past the failure.
Heartbeats are compared as values, never as times: a worker's clock is not the head's. The wait
ends once every placed worker answered; an agent that does not beat (its machine gone, its agent
killed) leaves the wait to its bound, and the failure as it read.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pyhelpers.jsonfiles import load_json_or_none
from pyhelpers.launch import cluster
from pyhelpers.run.layout import RunLayout

VERDICT_S = 30.0  # several of the agents' 2 s heartbeats, with room for a loaded machine
POLL_S = 0.25
BEATS = 2  # new heartbeat values that say the job's Ray outlived the question (above)


def _record(lay: RunLayout, addr: str) -> dict:
    return load_json_or_none(cluster.node_dir(lay, addr) / "node.json") or {}


def restarted(addr: str) -> str:
    """The line for a placed worker whose agent started its Ray again (here and loop._lost_nodes)."""
    return f"{addr} lost (its node agent started its Ray again since the job was placed)"


def _lost(worker: dict, info: dict) -> str | None:
    """Why `worker` (a nodes.json entry) is lost by its agent's record (node.json, read once), or None."""
    addr = worker["addr"]
    if cluster.generation_of(info) not in (None, worker["ray"]):
        return restarted(addr)
    if info.get("ray_ended") is not None:
        return f"{addr} lost (its Ray ended under the job: its raylet killed or crashed)"
    return None


def ask_agents(lay: RunLayout, placed: list[dict], echo: Callable[[str], None],
               timeout: float | None = None) -> list[str]:
    """The placed workers lost by their agents' word ([] when every one's Ray outlived the failure,
    or at the bound)."""
    workers = [w for w in placed if w.get("addr") and w.get("ray") is not None]
    if not workers:
        return []
    bound = VERDICT_S if timeout is None else timeout
    echo(f"asking the workers' agents whether the job's start of their Ray outlived its failure "
         f"(up to {bound:g} s)")
    values = {w["addr"]: [_record(lay, w["addr"]).get("heartbeat")] for w in workers}
    deadline = time.monotonic() + bound
    while True:
        lost = []
        for w in workers:
            info = _record(lay, w["addr"])
            if why := _lost(w, info):
                lost.append(why)
            elif info.get("heartbeat") != values[w["addr"]][-1]:
                values[w["addr"]].append(info.get("heartbeat"))
        if lost:
            return lost
        silent = [addr for addr, seen in values.items() if len(seen) <= BEATS]
        if not silent:
            return []
        if time.monotonic() >= deadline:
            echo(f"no answer from {', '.join(silent)} within {bound:g} s: the failure stays as it read")
            return []
        time.sleep(POLL_S)
