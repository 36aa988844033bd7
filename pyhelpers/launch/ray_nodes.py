"""The nodes of the run's Ray cluster, as its head knows them (a multi-node run, docs/multinode.md).

Read from Ray's state API on the loopback dashboard (GET /api/v0/nodes, what `ray list nodes`
calls: ray 2.60 dashboard/modules/state/state_head.py:136-140, the rows of
util/state/common.py:584-620 -- node_ip, is_head_node, state ALIVE/DEAD, state_message,
resources_total) with the run's token. A node whose raylet died stays listed as DEAD with its
address, which is how `make status` names a lost worker; one that rejoins is a new ALIVE row.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from pyhelpers.errors import ToolkitError
from pyhelpers.launch import ray_auth

POLL_S = 2.0  # between two reads of the node list while waiting


@dataclass(frozen=True)
class Node:
    node_id: str
    ip: str
    head: bool
    alive: bool      # Ray's GCS says ALIVE
    gpus: int
    why: str = ""    # Ray's state message of a dead node
    answering: bool = True  # its raylet's port accepts a connection (probed for workers)

    @property
    def up(self) -> bool:
        return self.alive and self.answering

    def line(self) -> str:
        role = "head" if self.head else "worker"
        state = "alive" if self.up else \
            "LOST (its raylet does not answer)" if self.alive else f"LOST ({self.why or 'dead'})"
        return f"{self.ip} {role}, {self.gpus} GPU(s), {state}"


def _answers(ip: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=timeout):
            return True
    except OSError:
        return False


def list_nodes(dashboard_port: int, run_dir: Path, raylet_port: int | None = None, timeout: float = 5.0) -> list[Node]:
    """The nodes Ray knows. raylet_port: each live worker's raylet port is probed too -- Ray's GCS
    takes its health check's failure threshold (tens of seconds) to declare a killed raylet's node
    dead, and until then lists it ALIVE."""
    import requests  # local: `make status` imports this module without a multi-node run

    url = f"http://127.0.0.1:{dashboard_port}/api/v0/nodes"
    with requests.Session() as http:
        http.trust_env = False  # loopback: never through an http_proxy of the environment
        r = http.get(url, params={"limit": 10000}, headers=ray_auth.headers(run_dir), timeout=timeout)
    if r.status_code in (401, 403):
        raise ray_auth.refused(r.status_code, url)
    r.raise_for_status()
    rows = ((r.json().get("data") or {}).get("result") or {}).get("result") or []
    out = []
    for n in rows:
        head, alive, ip = bool(n.get("is_head_node")), n.get("state") == "ALIVE", str(n.get("node_ip", ""))
        answering = head or not alive or raylet_port is None or _answers(ip, raylet_port)
        out.append(Node(str(n.get("node_id", "")), ip, head, alive, int(float((n.get("resources_total") or {}).get("GPU", 0))),
                        str(n.get("state_message") or ""), answering))
    return out


def missing(nodes: list[Node], nnodes: int, gpus: int) -> list[str]:
    """What keeps the cluster from being exactly NNODES live nodes of NUM_GPUS GPUs each ([] = whole)."""
    up = [n for n in nodes if n.up]
    out = [f"{n.ip} has {n.gpus} GPU(s), NUM_GPUS={gpus}" for n in up if n.gpus < gpus]
    back = {n.ip for n in up}
    lost: dict[str, str] = {}
    for n in nodes:
        if not n.up and n.ip not in back:
            lost.setdefault(n.ip, "its raylet does not answer" if n.alive else (n.why or "dead"))
    out += [f"{ip} lost ({why})" for ip, why in sorted(lost.items())]
    if len(up) < nnodes and nnodes - len(up) > len(lost):
        out.append(f"{nnodes - len(up) - len(lost)} worker(s) never joined")
    ips = [n.ip for n in up]
    stale = [n for n in up if ips.count(n.ip) > 1] + [n for n in nodes if n.alive and not n.answering and n.ip in back]
    if stale:  # a lost node rejoined before Ray retired its old entry: placement could still pick the old one
        out.append(f"{stale[0].ip} lost (rejoined, but Ray still lists its old entry as alive; it retires it "
                   "within its health check's window)")
    return out


def replaced(nodes: list[Node], placed: list[dict]) -> list[str]:
    """The workers a job was placed on (`placed`: {"id", "addr"} each, runs/<RUN>/nodes.json) whose Ray
    node is no longer up, even where the address answers again: a worker's node agent starts its Ray
    again on its own (node_agent.py), often before the head reads this list, and the new node is not
    the one the job's actors died with."""
    up = {n.node_id for n in nodes if n.up}
    back = {n.ip for n in nodes if n.up}
    return [f"{w['addr']} lost (its Ray node {w['id']} is gone" + ("; it rejoined as a new node)" if w["addr"] in back
                                                                   else ")")
            for w in placed if w.get("id") not in up]


def wait_for(nnodes: int, gpus: int, timeout: float, nodes: Callable[[], list[Node]],
             progress: Callable[[str], None] = lambda s: None, poll: float | None = None,
             clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
             replaced: Callable[[], set[str]] = set) -> list[Node]:
    """Wait up to timeout s until the cluster holds nnodes alive nodes of >= gpus GPUs each, saying
    who joined; refuse naming what is still missing. `replaced()`: node ids known lost (a job's node
    whose agent started its Ray again), never counted up however Ray still lists them; asked again
    after each read of the list, since an agent may start its Ray again while this waits."""
    deadline, seen, gaps, said, gone = clock() + timeout, set(), ["the head did not answer"], None, set()
    while True:
        try:
            got = nodes()
            # read after the list: a new raylet answering on the old node's port in it was started
            # after its agent wrote its new start (node_agent.py), so that start is seen here
            gone.update(replaced())
            # a node seen lost stays lost under its id: its raylet's port may be answered by the
            # rejoined node before Ray has retired the old entry (placement could pick the old one)
            gone.update(n.node_id for n in got if not n.up)
            got = [replace(n, answering=False) if n.node_id in gone and n.alive else n for n in got]
            gaps = missing(got, nnodes, gpus)
        except Exception as exc:  # noqa: BLE001 - the head may be busy; the deadline still applies
            got, gaps = [], [f"the head's state API did not answer ({type(exc).__name__})"]
        for n in got:
            if n.up and n.node_id not in seen:
                seen.add(n.node_id)
                progress(f"node {n.line()}")
        if gaps and gaps != said:
            progress("waiting for: " + "; ".join(gaps))
        said = gaps
        if not gaps and sum(n.up for n in got) == nnodes:
            return [n for n in got if n.up]
        if clock() >= deadline:
            raise ToolkitError(f"the cluster is not whole after {timeout:g} s (JOIN_TIMEOUT): " + "; ".join(gaps),
                               "the run's Ray head (make status lists its nodes)",
                               "on each missing worker run `make join` (its log: make logs SERVICE=ray-worker there), "
                               "then `make resume`")
        sleep(POLL_S if poll is None else poll)
