"""The decisions of a multi-node run that need no second node (docs/multinode.md)."""

from __future__ import annotations

import ipaddress
import json
import os
import time

import pytest

from pyhelpers.config import ray_ports
from pyhelpers.errors import ToolkitError
from pyhelpers.launch import cluster, join_checks, node_heartbeats, ray_start
from pyhelpers.procs import netns, procfs


def test_versions_that_differ_are_named_with_both_values():
    head = {"toolkit": "abc", "python": "3.12.8", "ray": "2.60.0", "slime": None, "sglang": "0.5.15.post1",
            "megatron-core": "0.16.0rc0"}
    assert join_checks.differences(head, dict(head)) == []
    worker = {**head, "ray": "2.59.0", "toolkit": "def+modified"}
    assert join_checks.differences(head, worker) == ["toolkit: head abc, this worker def+modified",
                                                     "ray: head 2.60.0, this worker 2.59.0"]


def test_a_refused_token_is_told_from_an_unreachable_head():
    assert cluster.is_auth_refusal("AuthenticationError: RPC error: InvalidAuthToken: Authentication token is missing")
    assert not cluster.is_auth_refusal("RpcError: Timed out while waiting for GCS to become available.")


def test_the_rehearsal_refuses_a_host_that_already_holds_test_net_2(monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("the refusal of a non-root user comes first")
    monkeypatch.setattr(netns.netif, "holding", lambda net: [("eth9", ipaddress.ip_address("198.51.100.7"))])
    with pytest.raises(ToolkitError, match=r"already holds an address of 198\.51\.100\.0/24.*198\.51\.100\.7 on eth9"):
        netns.preflight()


def test_one_node_keeps_todays_head_and_several_nodes_bind_node_addr(toolkit_env):
    from pyhelpers.config import load

    one = load.load({**toolkit_env})
    argv = ray_start.ray_head(one)
    assert argv[argv.index("--node-ip-address") + 1] == "127.0.0.1"
    assert ray_ports.env(one)["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"
    two = load.load({**toolkit_env, "NNODES": "2", "NODE_ADDR": "10.0.0.1", "NET_IFACE": "eth0",
                       "HEAD_ADDR": "10.0.0.1"})
    argv = ray_start.ray_head(two)
    assert argv[argv.index("--node-ip-address") + 1] == "10.0.0.1"
    assert argv[argv.index("--dashboard-host") + 1] == "127.0.0.1"
    env = ray_ports.env(two)
    assert "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER" not in env and env["SHOPSIMRL_METRICS_HOST"] == "127.0.0.1"
    worker = ray_start.ray_worker(two)
    assert worker[worker.index("--address") + 1] == f"10.0.0.1:{two['RAY_PORT']}"
    assert "--port" not in worker and "--ray-client-server-port" not in worker and "--dashboard-port" not in worker


def test_status_lists_each_node_with_its_state(toolkit_env, tmp_path):
    from pyhelpers.config import load
    from pyhelpers.run.layout import from_config

    cfg = load.load({**toolkit_env})
    lay = from_config(cfg)
    assert node_heartbeats.node_rows(cfg, lay, time.time()) == []
    (lay.run_dir / "nodes" / "10.0.0.2").mkdir(parents=True)
    (lay.run_dir / "nodes.json").write_text(json.dumps({"head": {"addr": "10.0.0.1", "gpus": 4}}))
    now = time.time()
    (lay.run_dir / "nodes" / "10.0.0.2" / "node.json").write_text(json.dumps(  # (this machine's: one clock)
        {"addr": "10.0.0.2", "gpus": 4, "heartbeat": now - 60, "host": procfs.hostname()}))
    lines = node_heartbeats.node_lines(node_heartbeats.node_rows(cfg, lay, now))
    assert lines[0] == "nodes: 1 of 2 up"
    assert lines[1].split()[:3] == ["head", "10.0.0.1", "4"]
    assert "worker 10.0.0.2" in " ".join(lines[2].split()) and lines[2].endswith("no heartbeat for 60 s")


def test_the_metrics_shim_moves_every_address_to_loopback_only(tmp_path):
    import subprocess
    import sys

    code = "from wsgiref.simple_server import make_server; s = make_server('', 0, lambda e, r: []); print(s.server_address[0])"
    env = {**os.environ, **ray_ports.multinode_env("")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "127.0.0.1"
    plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert plain.strip() == "0.0.0.0"


def _two_nodes(toolkit_env, **values):
    """NNODES=2 as the head sees it, without a second machine (the address checks need one)."""
    from dataclasses import replace

    from pyhelpers.config import load
    from pyhelpers.run.layout import from_config

    cfg = load.load({**toolkit_env})
    cfg = replace(cfg, values={**cfg.values, "NNODES": "2", "NODE_ADDR": "198.51.100.1", **values})
    return cfg, from_config(cfg)


def _node_json(lay, addr: str, **info) -> None:
    """A worker's node.json, written by an agent on this machine (its heartbeat is this clock's)."""
    (lay.run_dir / "nodes" / addr).mkdir(parents=True, exist_ok=True)
    (lay.run_dir / "nodes" / addr / "node.json").write_text(json.dumps(
        {"addr": addr, "gpus": 4, "host": procfs.hostname(), **info}))


def test_status_shows_a_worker_whose_ray_is_still_starting_and_does_not_count_it_up(toolkit_env):
    cfg, lay = _two_nodes(toolkit_env)
    now = time.time()
    _node_json(lay, "198.51.100.2", heartbeat=now, attempt=2, attempts=3, ray_started=None)
    _node_json(lay, "198.51.100.3", heartbeat=now, attempt=1, attempts=3, ray_started=now - 5)
    lines = node_heartbeats.node_lines(node_heartbeats.node_rows(cfg, lay, now))
    assert lines[0] == "nodes: 2 of 3 up"
    assert lines[2].endswith("starting its Ray node (attempt 2 of 3)"), lines
    assert lines[3].endswith("up"), lines


def test_status_shows_a_worker_waiting_to_rejoin_and_one_starting_again(toolkit_env):
    """Issue 41: a worker whose Ray node ended rejoins on its own; `make status` says which it is
    doing (its agent waits for the head's GCS, or starts its node again) instead of "up"."""
    cfg, lay = _two_nodes(toolkit_env)
    now = time.time()
    _node_json(lay, "198.51.100.2", heartbeat=now, attempt=1, attempts=3, ray_started=None, rejoins=0,
               rejoining=now - 30)
    _node_json(lay, "198.51.100.3", heartbeat=now, attempt=1, attempts=3, ray_started=None, rejoins=1)
    lines = node_heartbeats.node_lines(node_heartbeats.node_rows(cfg, lay, now))
    assert lines[0] == "nodes: 1 of 3 up", lines
    assert lines[2].endswith("its Ray node ended: waiting for the head's GCS to answer, then joining again"), lines
    assert lines[3].endswith("joining again: starting its Ray node (attempt 1 of 3, rejoin 1)"), lines


def test_status_says_a_worker_s_node_agent_was_killed_and_started_again_and_still_counts_it_up(toolkit_env):
    """Issue 41: the keeper (launch/node_keeper.py) started a killed node agent again; the worker is
    up once its Ray is, and `make status` says what happened to its agent."""
    cfg, lay = _two_nodes(toolkit_env)
    now = time.time()
    _node_json(lay, "198.51.100.2", heartbeat=now, attempt=1, attempts=3, ray_started=now - 5, agent_restarts=1)
    lines = node_heartbeats.node_lines(node_heartbeats.node_rows(cfg, lay, now))
    assert lines[0] == "nodes: 2 of 2 up", lines
    assert lines[2].endswith("up; its node agent was killed and started again (1 time(s))"), lines


def test_the_head_names_a_worker_whose_node_ended_while_it_waited(toolkit_env, monkeypatch):
    cfg, lay = _two_nodes(toolkit_env, JOIN_TIMEOUT="1.5")
    monkeypatch.setattr(cluster, "nodes", lambda cfg, lay: [])
    _node_json(lay, "198.51.100.3", heartbeat=time.time() - 3600, ended=time.time() - 3600, exit=1)  # an old run's
    said = []

    def ends_while_waiting(line):
        said.append(line)
        if len(said) == 1:
            # written by the worker's clock, two hours behind this one's: told by its value, not its time
            skew = -7200
            _node_json(lay, "198.51.100.2", heartbeat=time.time() + skew, ended=time.time() + skew, exit=1,
                       attempt=3, attempts=3, ray_started=None)

    with pytest.raises(ToolkitError) as err:
        cluster.wait_for_workers(cfg, lay, ends_while_waiting, poll=0.2)
    named = [line for line in said if "198.51.100.2" in line]
    assert len(named) == 1, said
    assert "worker 198.51.100.2's Ray node ended (exit 1) without joining" in named[0]
    assert "nodes/198.51.100.2/logs/ray-worker.log" in named[0] and "make join" in named[0]
    assert "198.51.100.2's Ray node ended (exit 1)" in str(err.value)
    assert not [line for line in said if "198.51.100.3" in line]
