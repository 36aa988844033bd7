"""The decisions of a multi-node run that need no second node (docs/multinode.md)."""

from __future__ import annotations

import ipaddress
import json
import os
import time

import pytest

from pyhelpers.config import ray_ports
from pyhelpers.errors import ToolkitError
from pyhelpers.launch import cluster, slime_args
from pyhelpers.procs import netns


def test_versions_that_differ_are_named_with_both_values():
    head = {"toolkit": "abc", "python": "3.12.8", "ray": "2.60.0", "slime": None, "sglang": "0.5.15.post1",
            "megatron-core": "0.16.0rc0"}
    assert cluster.differences(head, dict(head)) == []
    worker = {**head, "ray": "2.59.0", "toolkit": "def+modified"}
    assert cluster.differences(head, worker) == ["toolkit: head abc, this worker def+modified",
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
    from pyhelpers.config import load as config

    one = config.load({**toolkit_env})
    argv = slime_args.ray_head(one)
    assert argv[argv.index("--node-ip-address") + 1] == "127.0.0.1"
    assert ray_ports.env(one)["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"
    two = config.load({**toolkit_env, "NNODES": "2", "NODE_ADDR": "10.0.0.1", "NET_IFACE": "eth0",
                       "HEAD_ADDR": "10.0.0.1"})
    argv = slime_args.ray_head(two)
    assert argv[argv.index("--node-ip-address") + 1] == "10.0.0.1"
    assert argv[argv.index("--dashboard-host") + 1] == "127.0.0.1"
    env = ray_ports.env(two)
    assert "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER" not in env and env["SHOPSIMRL_METRICS_HOST"] == "127.0.0.1"
    worker = slime_args.ray_worker(two)
    assert worker[worker.index("--address") + 1] == f"10.0.0.1:{two['RAY_PORT']}"
    assert "--port" not in worker and "--ray-client-server-port" not in worker and "--dashboard-port" not in worker


def test_status_lists_each_node_with_its_state(toolkit_env, tmp_path):
    from pyhelpers.config import load as config
    from pyhelpers.run.layout import from_config

    cfg = config.load({**toolkit_env})
    lay = from_config(cfg)
    assert cluster.node_rows(cfg, lay, time.time()) == []
    (lay.run_dir / "nodes" / "10.0.0.2").mkdir(parents=True)
    (lay.run_dir / "nodes.json").write_text(json.dumps({"head": {"addr": "10.0.0.1", "gpus": 4}}))
    now = time.time()
    (lay.run_dir / "nodes" / "10.0.0.2" / "node.json").write_text(json.dumps(
        {"addr": "10.0.0.2", "gpus": 4, "heartbeat": now - 60}))
    lines = cluster.node_lines(cluster.node_rows(cfg, lay, now))
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
