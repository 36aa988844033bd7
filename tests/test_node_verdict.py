"""A multi-node job's failure that nothing yet ties to a worker: the loop asks the placed workers'
agents whether the job's start of their Ray outlived it, before it picks the restart (one-job
mode's race: a worker's raylet killed under the job ended it with an ActorUnavailableError -- the
socket closed -- before Ray's health check or the agent's restart of its Ray said the node went, so
the restart was the full one, the head's Ray too, where stopping the job was the restart)."""

from __future__ import annotations

import threading
import time

from test_multinode_job import _lost_node_loop

from pyhelpers.errors import ToolkitError
from pyhelpers.jsonfiles import write_json_atomic
from pyhelpers.launch import cluster, ray_nodes, services
from pyhelpers.launch.ray_nodes import Node
from pyhelpers.loop import node_verdict
from pyhelpers.run import events

WORKER = "198.51.100.2"
HEAD = Node("h1", "198.51.100.1", True, True, 4)
ALIVE = Node("w1", WORKER, False, True, 4)  # Ray's health check has not failed yet
# what slime's driver printed as it ended (CI of 315a637): no address, so nothing names the node
SOCKET_CLOSED = ("ray.exceptions.ActorUnavailableError: The actor 9298cd53a1703d43e41dc24a07000000 is unavailable: "
                 "The actor is temporarily unavailable: RpcError: RPC error: Socket closed rpc_code: 14. The task "
                 "may or may not have been executed on the actor.\n")


def _placed_loop(toolkit_env, monkeypatch, asked: threading.Event):
    lp, _, calls, lines = _lost_node_loop(toolkit_env, monkeypatch, lambda *a, **k: [HEAD, ALIVE])
    monkeypatch.setattr(services, "alive", lambda lay, name: True)
    monkeypatch.setattr(ray_nodes, "wait_for", lambda *a, **k: [HEAD, ALIVE])
    monkeypatch.setattr(node_verdict, "POLL_S", 0.01)

    def echo(line: str) -> None:
        lines.append(line)
        if "whether the job's start of their Ray outlived" in line:
            asked.set()
    lp.echo = echo
    beat = {"addr": WORKER, "pid": 4242, "agent_restarts": 0, "attempt": 1, "rejoins": 0, "ray_started": 1.0,
            "heartbeat": 100.0}
    node_json = cluster.node_dir(lp.lay, WORKER) / "node.json"
    node_json.parent.mkdir(parents=True)
    write_json_atomic(node_json, beat)
    write_json_atomic(lp.lay.run_dir / "nodes.json", {"head": {"id": "h1"}, "workers": [
        {"id": "w1", "addr": WORKER, "alive": True, "gpus": 4, "ray": cluster.ray_generation(lp.lay, WORKER)}]})
    (lp.lay.logs / "slime-log.log").write_text(SOCKET_CLOSED)
    return lp, calls, lines, node_json, beat


def _restart(lp) -> dict:
    return [e for e in events.read(lp.lay.run_dir) if e["kind"] == "run-restart"][-1]


def test_a_worker_whose_agent_saw_the_jobs_ray_end_makes_the_failure_node_lost(toolkit_env, monkeypatch):
    asked = threading.Event()
    lp, calls, lines, node_json, beat = _placed_loop(toolkit_env, monkeypatch, asked)

    def agent():  # the worker's agent, once the loop asks: `ray start --block` ended under the job
        asked.wait()
        write_json_atomic(node_json, {**beat, "heartbeat": 102.0, "ray_ended": 103.0})
    t = threading.Thread(target=agent)
    t.start()
    try:
        lp._failed(1, "train", ToolkitError("slime job x FAILED (exit code 1): ", "round 1", ""))
    finally:
        asked.set()  # the thread ends even where the loop never asked
        t.join()
    restart = _restart(lp)
    assert restart["cause"] == "node-lost" and calls == ["stop_job"], (restart, calls, lines)
    assert f"{WORKER} lost (its Ray ended under the job" in restart["excerpt"], restart


def test_a_worker_whose_ray_outlived_the_failure_leaves_it_as_read(toolkit_env, monkeypatch):
    # a real engine failure beside a healthy worker: its agent beats twice with the job's Ray running,
    # and the restart is the full one, as the failure read (no wait to the bound: it would take minutes)
    monkeypatch.setattr(node_verdict, "VERDICT_S", 600.0)
    asked = threading.Event()
    lp, calls, lines, node_json, beat = _placed_loop(toolkit_env, monkeypatch, asked)

    read = []
    original = node_verdict._record

    def record(lay, addr):  # what the loop read, so that the agent beats again only once it was read
        info = original(lay, addr)
        read.append(info.get("heartbeat"))
        return info
    monkeypatch.setattr(node_verdict, "_record", record)

    def agent():
        asked.wait()
        for hb in (102.0, 104.0):
            write_json_atomic(node_json, {**beat, "heartbeat": hb})
            while hb not in read and not done.is_set():  # a beat the loop never saw is no answer
                time.sleep(0.01)
    done = threading.Event()
    t = threading.Thread(target=agent)
    t.start()
    try:
        lp._failed(1, "train", ToolkitError("slime job x FAILED (exit code 1): ", "round 1", ""))
    finally:
        done.set()
        asked.set()
        t.join()
    restart = _restart(lp)
    assert restart["cause"] == "engine" and "cleanup" in calls, (restart, calls, lines)


def test_a_worker_agent_that_does_not_answer_leaves_the_failure_as_read_at_the_bound(toolkit_env, monkeypatch):
    monkeypatch.setattr(node_verdict, "VERDICT_S", 0.05)
    lp, calls, lines, _, _ = _placed_loop(toolkit_env, monkeypatch, threading.Event())
    lp._failed(1, "train", ToolkitError("slime job x FAILED (exit code 1): ", "round 1", ""))
    assert _restart(lp)["cause"] == "engine" and "cleanup" in calls, (calls, lines)
    assert any("no answer from 198.51.100.2" in ln for ln in lines), lines
