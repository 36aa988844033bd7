"""Machines' clocks in a multi-node run (docs/multinode.md §5): two machines' wall clocks differ by
seconds to minutes without NTP, so a worker's liveness is judged on one machine's clock, and
`make doctor` on the head says when the nodes' clocks disagree."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace

import pytest

from pyhelpers.launch import cluster, node_agent, node_heartbeats
from pyhelpers.procs import procfs

HEAD, WORKER = "198.51.100.1", "198.51.100.2"


@pytest.fixture
def head(toolkit_env):
    """The head's configuration of an NNODES=2 run (its addresses put in after the machine checks)."""
    from pyhelpers.config import load
    from pyhelpers.run.layout import from_config

    cfg = load.load({**toolkit_env})
    cfg = replace(cfg, values={**cfg.values, "NNODES": "2", "NODE_ADDR": HEAD})
    return cfg, from_config(cfg)


def _beat(lay, at: float, host: str = "the-workers-machine") -> None:
    """The worker's agent rewrites its node.json: `at` is the worker's own clock."""
    d = cluster.node_dir(lay, WORKER)
    d.mkdir(parents=True, exist_ok=True)
    (d / "node.json").write_text(json.dumps({"addr": WORKER, "gpus": 4, "host": host, "heartbeat": at,
                                             "ray_started": at - 100}))


def _state(cfg, lay, now: float) -> str:
    return next(r["state"] for r in node_heartbeats.node_rows(cfg, lay, now) if r["addr"] == WORKER)


def test_a_worker_whose_clock_is_two_hours_behind_is_not_called_silent(head):
    cfg, lay = head
    here = procfs.hostname()
    now = time.time()
    _beat(lay, now - 7200)  # it just wrote it, by its own clock
    assert "no heartbeat" not in _state(cfg, lay, now)
    # the head's driver notes when the heartbeat changes, by the head's clock
    node_heartbeats.note_heartbeats(lay, now - 4, here)
    _beat(lay, now - 7198)
    node_heartbeats.note_heartbeats(lay, now - 2, here)
    assert _state(cfg, lay, now) == "up"


def test_a_heartbeat_that_stopped_changing_is_named_with_the_age_the_head_measured(head):
    cfg, lay = head
    here = procfs.hostname()
    now = time.time()
    _beat(lay, now + 3600)  # an hour ahead: nothing the head can compare its own time with
    node_heartbeats.note_heartbeats(lay, now - 40, here)
    node_heartbeats.note_heartbeats(lay, now - 1, here)  # the same heartbeat 39 s later
    assert _state(cfg, lay, now) == "no heartbeat for 40 s"


def test_on_the_workers_own_machine_its_heartbeat_is_read_with_its_own_clock(head):
    cfg, lay = head
    now = time.time()
    _beat(lay, now - 60, host=procfs.hostname())
    assert _state(cfg, lay, now) == "no heartbeat for 60 s"


def test_another_machines_heartbeat_with_nobody_watching_is_not_judged(head):
    cfg, lay = head
    now = time.time()
    _beat(lay, now - 60)
    state = _state(cfg, lay, now)
    assert state.startswith("heartbeat not judged") and "make status on the head" in state, state
    assert node_heartbeats.node_lines(node_heartbeats.node_rows(cfg, lay, now))[0] == "nodes: 1 of 2 up"


def test_the_runs_stop_marker_stops_a_worker_whatever_the_clock_of_the_machine_that_wrote_it(head):
    """`make stop` on the head writes the marker with the head's (or the file server's) time, which may
    be behind the worker's: the agent goes by whether the marker changed since it started."""
    cfg, lay = head
    stop = node_agent.stop_watch(lay, WORKER)
    assert stop() is None
    lay.stopped_marker.parent.mkdir(parents=True, exist_ok=True)
    lay.stopped_marker.write_text("make stop")
    behind = time.time() - 3600
    os.utime(lay.stopped_marker, (behind, behind))
    assert stop() == "the run was stopped"


def _clocks(monkeypatch, cfg, answer: dict):
    from pyhelpers.doctor import node_clocks, runner
    from pyhelpers.doctor.base import Context
    from pyhelpers.launch import services

    monkeypatch.setattr(services, "alive", lambda lay, name: name == "ray-head")
    asked = []

    def probe(cfg, lay, *args, stdin="", timeout=180):
        asked.append(args)
        return answer
    monkeypatch.setattr(cluster, "probe", probe)
    got = runner.run_one(Context(cfg, os.environ, cfg.DOCTOR_PROFILE), "node-clocks", node_clocks.check_node_clocks)
    assert asked == [("clocks", cluster.gcs_address(cfg))], asked
    return {r.name: r for r in got}["node-clocks"]


def test_doctor_on_the_head_names_a_worker_whose_clock_disagrees(head, monkeypatch):
    cfg, _ = head
    t = time.time()
    res = _clocks(monkeypatch, cfg, {"clocks": {WORKER: {"before": t, "theirs": t + 42.6, "after": t + 0.2}}})
    assert res.status == "WARN", res
    assert f"{WORKER}'s clock is 42.5 s ahead of the head's" in res.found, res.found
    assert "NTP" in res.fix, res.fix


def test_doctor_on_the_head_passes_clocks_that_agree_within_the_round_trip(head, monkeypatch):
    cfg, _ = head
    t = time.time()
    res = _clocks(monkeypatch, cfg, {"clocks": {WORKER: {"before": t, "theirs": t + 1.9, "after": t + 3.0}}})
    assert res.status == "PASS" and WORKER in res.found, res


def test_the_driver_of_a_multinode_run_notes_each_workers_heartbeat_while_it_runs(head, monkeypatch):
    from pyhelpers.loop import loop

    cfg, lay = head
    _beat(lay, time.time() - 7200)
    seen = cluster.node_dir(lay, WORKER) / node_heartbeats.SEEN_NAME
    lp = loop.Loop(cfg, lay, model_args=[], echo=lambda line: None)

    def stages(stop_before):  # the run's stages, while which the driver watches
        end = time.monotonic() + 120
        while not seen.is_file():
            assert time.monotonic() < end, "the driver never noted the worker's heartbeat"
            time.sleep(0.05)
        return "done"
    monkeypatch.setattr(lp, "_stages", stages)
    assert lp.run() == "done"
    assert json.loads(seen.read_text())["by"] == procfs.hostname()
    assert _state(cfg, lay, time.time()) == "up"
