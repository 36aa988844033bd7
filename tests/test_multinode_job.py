"""The slime job across nodes (issue 28 items 5, 6, 8, 9): its command lines, its environment, the
doctor's InfiniBand warning, the `node-lost` restart rule. NNODES=1 stays byte-identical to the
one-node toolkit (tests/golden/plan-one-node.txt, written by the toolkit before multi-node existed;
since then only the one-job mode's command line was added to it, issue 44)."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import ROOT

from pyhelpers import stages
from pyhelpers.config import load
from pyhelpers.launch import slime_args
from pyhelpers.overview import plan
from pyhelpers.run.layout import from_config

GOLDEN = ROOT / "tests" / "golden"
MODEL_ARGS = ["--num-layers", "32"]


def _plan_text(env: dict, tmp_path: Path) -> str:
    """`make plan`'s lines with this test's own paths and the machine's free space made neutral."""
    cfg = load.load(env)
    text = "\n".join(plan.plan(cfg, from_config(cfg), model_args=MODEL_ARGS)) + "\n"
    text = text.replace(cfg.ray_temp_dir, "<RAY_TEMP>").replace(str(tmp_path), "<TMP>").replace(str(ROOT), "<ROOT>")
    return re.sub(r"[0-9.]+ GB free", "<N> GB free", text)


# A whole round as the plan writes it, from the registry (`a || b`: b starts beside a, the default
# VAL_BESIDE_COMPILE=1); the golden file holds <ROUND> in its place, so it lists no stage.
ROUND_LINE = "".join((" || " if prev.beside == s.name else " -> ") + s.label if prev else s.label
                     for prev, s in zip((None, *stages.ROUND[:-1]), stages.ROUND, strict=True))


def test_a_one_node_plan_is_byte_identical_to_the_one_node_toolkits(toolkit_env, tmp_path):
    text = _plan_text(toolkit_env, tmp_path)
    assert text.replace(f": {ROUND_LINE}\n", ": <ROUND>\n") == (GOLDEN / "plan-one-node.txt").read_text()


# What Ray 2.60 writes when a worker node's raylet dies under the job (the GCS's health check,
# then the actor's death cause: strings of ray/_raylet.so and gcs_server at 2.60.0).
NODE_LOST_LOG = """\
fake slime: rollout 5: 64 samples, mean reward 0.312
Traceback (most recent call last):
  File "/root/slime/train.py", line 61, in train
    rollout_data_ref = ray.get(rollout_manager.generate.remote(rollout_id))
ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.
\tclass_name: RolloutManager
\tip: 198.51.100.2
The actor died because its node has died. Node Id: 4c0f3e1d9b
\tthe actor's node was terminated unexpectedly: health check failed due to missing too many heartbeats
"""
TASK_NODE_LOST = ("ray.exceptions.RayTaskError: Task failed because the node it was running on is dead or "
                  "unavailable. Node IP: 198.51.100.2, node ID: 4c0f3e1d9b. This can happen if the node was "
                  "preempted, had a hardware failure, or its raylet crashed unexpectedly.")


def test_a_lost_worker_node_is_its_own_transient_cause_naming_the_node():
    from pyhelpers.loop.supervisor import TRANSIENT, classify

    for log in (NODE_LOST_LOG, TASK_NODE_LOST):
        f = classify("train", 1, 25, "slime job FAILED (exit code 1): ", log)
        assert (f.cause, f.kind) == ("node-lost", TRANSIENT), f
    # a plain engine death on a live node stays `engine`; a killed process stays `node`
    assert classify("train", 1, 25, "x", "ray.exceptions.ActorDiedError: The actor is dead because its "
                    "worker process has died.").cause == "engine"
    assert classify("train", 1, 25, "slime job FAILED (exit code -9)", "").cause == "node"


def _fake_ib(root: Path, *states: str) -> Path:
    """A /sys/class/infiniband with one device per state (its port 1's state file, as the kernel's)."""
    for i, state in enumerate(states):
        port = root / f"mlx5_{i}" / "ports" / "1"
        port.mkdir(parents=True)
        (port / "state").write_text(f"{state}\n")
    return root


def _nccl_net(env: dict, monkeypatch, ib_root: Path) -> dict:
    from pyhelpers.doctor import nccl_net, runner
    from pyhelpers.doctor.base import Context

    monkeypatch.setattr(nccl_net, "IB_ROOT", ib_root)
    cfg = load.load(env)
    ctx = Context(cfg, env, cfg.DOCTOR_PROFILE)
    return {r.name: r for r in runner.run_one(ctx, "nccl-net", nccl_net.check_nccl_net)}


def test_doctor_warns_when_nccl_would_use_sockets_beside_infiniband(toolkit_env, tmp_path, monkeypatch):
    two = {**toolkit_env, "NNODES": "2", "NODE_ADDR": "198.51.100.1", "NET_IFACE": "eth0"}
    ib = _fake_ib(tmp_path / "ib", "4: ACTIVE", "1: DOWN")
    for off in ({"NCCL_IB_DISABLE": "1"}, {"NCCL_NET": "Socket"}):
        r = _nccl_net({**two, **off}, monkeypatch, ib)["nccl-net"]
        assert r.status == "WARN", r
        name, value = next(iter(off.items()))
        assert f"{name}={value}" in r.found and "TCP sockets" in r.found and "mlx5_0" in r.found, r.found
        assert f"unset {name}" in r.fix, r.fix
    assert _nccl_net(two, monkeypatch, ib)["nccl-net"].status == "PASS"
    down = _nccl_net(two, monkeypatch, _fake_ib(tmp_path / "ib-down", "1: DOWN"))["nccl-net"]
    assert down.status == "WARN" and "no port ACTIVE" in down.found, down
    none = _nccl_net({**two, "NCCL_IB_DISABLE": "1"}, monkeypatch, tmp_path / "no-ib")["nccl-net"]
    assert none.status == "PASS" and "no InfiniBand device" in none.found, none
    one = _nccl_net({**toolkit_env, "NCCL_IB_DISABLE": "1"}, monkeypatch, ib)["nccl-net"]
    assert one.status == "PASS" and "one node" in one.found, one


def _two_nodes(env: dict, **more) -> dict:
    """A head's configuration of a two-node run (addresses of the documentation range: the knobs'
    own check, not the subject here, would refuse them on this machine)."""
    return {**env, "NNODES": "2", "NODE_ADDR": "198.51.100.1", "NET_IFACE": "veth-head", **more}


def test_a_two_node_job_spans_both_nodes_with_four_gpus_each(toolkit_env):
    cfg = load.load(_two_nodes(toolkit_env))
    argv = slime_args.slime_train(cfg, from_config(cfg), 0, [])
    joined = " ".join(argv)
    assert "--actor-num-nodes 2 --actor-num-gpus-per-node 4 --num-gpus-per-node 4 --colocate" in joined, joined
    # slime then sets --rollout-num-gpus to actor_num_gpus_per_node x actor_num_nodes under --colocate
    # (slime 624b824 slime/utils/arguments.py:1922-1923): engines on all 8 GPUs, no flag of ours
    assert "--rollout-num-gpus " not in joined


PROXIES = {"http_proxy": "http://proxy.corp:3128", "HTTPS_PROXY": "http://proxy.corp:3128",
           "ALL_PROXY": "socks5://proxy.corp:1080", "no_proxy": "localhost"}


def test_the_jobs_env_clears_proxies_and_leaves_per_node_values_to_each_raylet(toolkit_env, monkeypatch):
    from pyhelpers.launch import node_env, services

    for k, v in {**PROXIES, "SLIME_HOST_IP": "10.0.0.9", "NCCL_SOCKET_IFNAME": "eth9"}.items():
        monkeypatch.setenv(k, v)
    cfg = load.load(_two_nodes(toolkit_env))
    job = slime_args.runtime_env(cfg)["env_vars"]
    assert {k: job.get(k) for k in node_env.PROXY_VARS} == dict.fromkeys(node_env.PROXY_VARS, "")
    # the runtime env is the same on every node: a per-node value there would override each raylet's
    assert not {"SLIME_HOST_IP", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"} & set(job), job
    head = services.spec(cfg, from_config(cfg), "ray-head")
    assert {k: head.env_extra.get(k) for k in ("SLIME_HOST_IP", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")} == \
        {"SLIME_HOST_IP": "198.51.100.1", "NCCL_SOCKET_IFNAME": "=veth-head", "GLOO_SOCKET_IFNAME": "veth-head"}
    assert set(node_env.PROXY_VARS) <= set(head.env_drop), head.env_drop
    # one node: as before (no proxy clearing, no per-node values: tests/golden/plan-one-node.txt)
    one = load.load(toolkit_env)
    assert not set(node_env.PROXY_VARS) & set(slime_args.runtime_env(one)["env_vars"])
    assert "SLIME_HOST_IP" not in services.spec(one, from_config(one), "ray-head").env_extra


class _Cluster:
    """The head's node list as Ray's state API gives it, step by step: the worker lost, then back as
    a new node after `rejoin_after` reads (None: never)."""

    def __init__(self, rejoin_after: int | None):
        self.reads, self.rejoin_after = 0, rejoin_after

    def __call__(self, *_a, **_k):
        from pyhelpers.launch.ray_nodes import Node

        self.reads += 1
        nodes = [Node("h1", "198.51.100.1", True, True, 4),
                 Node("w1", "198.51.100.2", False, False, 4, "health check failed due to missing too many heartbeats")]
        if self.rejoin_after is not None and self.reads > self.rejoin_after:
            nodes.append(Node("w2", "198.51.100.2", False, True, 4))
        return nodes


def _lost_node_loop(toolkit_env, monkeypatch, cluster, **knobs):
    from pyhelpers.errors import ToolkitError
    from pyhelpers.launch import ray_nodes, slime_job
    from pyhelpers.loop import loop

    cfg = load.load(_two_nodes(toolkit_env, RESTART_BACKOFF="0", **knobs))
    lay = from_config(cfg)
    lay.logs.mkdir(parents=True, exist_ok=True)
    (lay.logs / "slime-log.log").write_text(NODE_LOST_LOG)
    calls = []
    monkeypatch.setattr(ray_nodes, "list_nodes", cluster)
    monkeypatch.setattr(ray_nodes, "POLL_S", 0.01)
    monkeypatch.setattr(slime_job, "stop", lambda *a: calls.append("stop_job") or "slime job: stopped")
    monkeypatch.setattr(loop.stop, "cleanup", lambda *a, **k: calls.append("cleanup") or [])
    lines = []
    lp = loop.Loop(cfg, lay, model_args=[], echo=lines.append)
    exc = ToolkitError("slime job x FAILED (exit code 1): ", "round 0; full log: logs/slime-log.log", "")
    return lp, exc, calls, lines


def test_a_lost_node_restart_keeps_the_head_and_waits_for_the_node_to_rejoin(toolkit_env, monkeypatch):
    from pyhelpers.run import events

    cluster = _Cluster(rejoin_after=3)
    lp, exc, calls, lines = _lost_node_loop(toolkit_env, monkeypatch, cluster)
    lp._failed(0, "train", exc)  # returns: the loop then continues from the last checkpoint
    assert calls == ["stop_job"], calls  # the head, its other workers and ShopSimulator stay up
    assert cluster.reads == 4, cluster.reads
    text = "\n".join(lines)
    assert "198.51.100.2 lost" in text and "node 198.51.100.2 worker, 4 GPU(s), alive" in text, text
    restart = [e for e in events.read(lp.lay.run_dir) if e["kind"] == "run-restart"]
    assert restart and restart[-1]["cause"] == "node-lost", restart
    # the error's type is kept: a test tells the restart its fault caused from a start its load slowed
    assert restart[-1]["error"] == type(exc).__name__, restart


def test_a_lost_node_that_never_rejoins_stops_the_run_naming_it(toolkit_env, monkeypatch):
    import pytest

    from pyhelpers.errors import ToolkitError

    lp, exc, calls, lines = _lost_node_loop(toolkit_env, monkeypatch, _Cluster(rejoin_after=None),
                                            JOIN_TIMEOUT="0.05")
    with pytest.raises(ToolkitError, match=r"not whole after 0.05 s \(JOIN_TIMEOUT\): 198.51.100.2 lost") as err:
        lp._failed(0, "train", exc)
    assert "make join" in err.value.fix, err.value.fix


def test_status_lists_the_nodes_with_gpus_and_addresses_and_names_a_lost_one(toolkit_env, monkeypatch):
    from pyhelpers.launch import ray_nodes
    from pyhelpers.overview import manifest, status

    cfg = load.load(_two_nodes(toolkit_env))
    lay = from_config(cfg)
    lay.run_dir.mkdir(parents=True)
    manifest.record_or_compare(cfg, lay.manifest)
    monkeypatch.setattr(ray_nodes, "list_nodes", _Cluster(rejoin_after=None))
    monkeypatch.setattr(status, "_ray_head_up", lambda st: True)
    st = status.gather(cfg, lay)
    text = "\n".join(status.render(st))
    assert "Ray's nodes: 1 of 2 alive (NNODES=2)" in text, text
    assert "198.51.100.1 head, 4 GPU(s), alive" in text, text
    assert "MISSING: 198.51.100.2 lost (health check failed due to missing too many heartbeats)" in text, text
    assert st["ray_nodes"]["missing"] == ["198.51.100.2 lost (health check failed due to missing too many heartbeats)"]
    one = load.load(toolkit_env)
    assert "ray_nodes" not in status.gather(one, from_config(one))


def test_the_report_records_the_node_count(toolkit_env, tmp_path):
    from pyhelpers.overview import manifest
    from pyhelpers.report import data, html

    cfg = load.load(_two_nodes(toolkit_env))
    lay = from_config(cfg)
    lay.run_dir.mkdir(parents=True)
    manifest.record_or_compare(cfg, lay.manifest)
    tables = data.gather(load.load(toolkit_env), lay)  # run.json says what the run used, not today's .env
    assert (tables.nodes, tables.gpus_per_node) == (2, 4)
    pngs = {key: tmp_path / f"{key}.png" for key, *_ in html.SECTIONS}
    page = html.write(tmp_path / "index.html", cfg.run_name, t=tables, pngs=pngs, csvs={}).read_text()
    assert "on 2 node(s) of 4 GPU(s)" in page


def test_a_killed_raylet_counts_as_lost_before_ray_declares_it_and_its_old_entry_blocks_the_rejoin():
    from pyhelpers.launch.ray_nodes import Node, missing

    head = Node("h1", "198.51.100.1", True, True, 4)
    killed = Node("w1", "198.51.100.2", False, True, 4, answering=False)  # GCS: ALIVE; its raylet: gone
    assert missing([head, killed], 2, 4) == ["198.51.100.2 lost (its raylet does not answer)"]
    back = Node("w2", "198.51.100.2", False, True, 4)
    stale = Node("w1", "198.51.100.2", False, True, 4)  # the old entry, still ALIVE in the GCS, port answered by w2
    assert "old entry" in " ".join(missing([head, stale, back], 2, 4)), missing([head, stale, back], 2, 4)
    retired = Node("w1", "198.51.100.2", False, False, 4, "health check failed")
    assert missing([head, retired, back], 2, 4) == []
    assert missing([head], 2, 4) == ["1 worker(s) never joined"]
    assert missing([head, Node("w3", "198.51.100.3", False, True, 2)], 2, 4) == ["198.51.100.3 has 2 GPU(s), NUM_GPUS=4"]


def test_a_worker_the_job_was_placed_on_counts_as_lost_even_once_it_rejoined_as_a_new_node():
    """Issue 41: a worker's node agent now starts its Ray again on its own, often before the driver
    reads the node list after the job failed. In the fault matrix's two-node rehearsal the killed
    raylet's job failure was read as `node` (every service restarted) instead of `node-lost`: by
    then the address answered again, from the rejoined node. The workers the job was placed on
    (nodes.json, written by head_ready as the train stage starts) tell: their Ray node ids."""
    from pyhelpers.launch.ray_nodes import Node, replaced

    head = Node("h1", "198.51.100.1", True, True, 4)
    placed = [{"id": "w1", "addr": "198.51.100.2"}]
    retired = Node("w1", "198.51.100.2", False, False, 4, "health check failed")
    back = Node("w2", "198.51.100.2", False, True, 4)
    assert replaced([head, retired, back], placed) == [
        "198.51.100.2 lost (its Ray node w1 is gone; it rejoined as a new node)"]
    assert replaced([head, back], placed) == ["198.51.100.2 lost (its Ray node w1 is gone; it rejoined as a new node)"]
    assert replaced([head, retired], placed) == ["198.51.100.2 lost (its Ray node w1 is gone)"]
    assert replaced([head, Node("w1", "198.51.100.2", False, True, 4)], placed) == []  # still the job's node
    assert replaced([head, back], []) == []


def test_the_head_does_not_wait_for_a_rollout_process_of_another_machine(toolkit_env, tmp_path):
    """On a multi-node run the plugin's process (slime's RolloutManager) may have run on a worker: its
    pid means nothing on the head, and waiting for it would stall every round for STOP_GRACE + 30 s."""
    import os

    from pyhelpers.jsonfiles import write_json_atomic
    from pyhelpers.procs import procfs
    from pyhelpers.stages import train

    cfg = load.load(toolkit_env)
    lay = from_config(cfg)
    lay.round(0).plugin_process.parent.mkdir(parents=True)
    me = {"pid": os.getpid(), "ticks": procfs.start_ticks(os.getpid())}  # alive, here: would be waited for
    write_json_atomic(lay.round(0).plugin_process, {**me, "boot_id": "another-machine"})
    said = []
    train._wait_for_old_plugin(lay, 1, timeout=0.3, echo=said.append)
    assert said == [], said
    write_json_atomic(lay.round(0).plugin_process, {**me, "boot_id": procfs.boot_id()})
    train._wait_for_old_plugin(lay, 1, timeout=0.3, echo=said.append)
    assert said and "still running" in said[0]  # on this machine it is still waited for


def test_a_two_node_plan_shows_the_heads_and_the_workers_command_lines(toolkit_env, tmp_path):
    text = _plan_text(_two_nodes(toolkit_env), tmp_path)
    lines = text.splitlines()
    job = next(ln for ln in lines if ln.startswith("  slime job: "))
    assert "--actor-num-nodes 2 --actor-num-gpus-per-node 4 --num-gpus-per-node 4" in job, job
    head = next(ln for ln in lines if ln.startswith("  ray-head: "))
    assert "--node-ip-address 198.51.100.1" in head, head
    worker = next((ln for ln in lines if ln.startswith("  worker")), None)
    assert worker is not None, text
    assert "make join" in worker and "ray start" in worker and "--address 198.51.100.1:6380" in worker, worker
    gate = next((ln for ln in lines if ln.startswith("  shopsim-gate: ")), None)
    assert gate is not None and "--listen 198.51.100.1:5700" in gate and "--token-file" in gate, text
    # per node: the environment each node's `ray start` gets, and the job's proxies cleared
    assert "SLIME_HOST_IP=198.51.100.1" in text and "NCCL_SOCKET_IFNAME==veth-head" in text, text
    assert '"http_proxy": ""' in text, text
    opens = next(ln for ln in lines if ln.startswith("opens: "))
    assert "198.51.100.1:5700 (ShopSimulator's gate, token required)" in opens, opens


def test_a_worker_whose_agent_started_its_ray_again_under_the_job_is_lost_whatever_ray_lists(toolkit_env, monkeypatch):
    """Issue 41 (CI of d21ee28): a killed raylet's job failure ("Connection refused" to its actor) was
    read as `node` -- every service restarted -- where it was `node-lost`. Ray's GCS still listed the
    job's node ALIVE (its health check had not failed yet) and the raylet port answered: the agent had
    already started its Ray again on the same port. The agent writes each start of its Ray to its
    node.json before `ray start` runs; nodes.json keeps the one the job was placed on."""
    from pyhelpers.errors import ToolkitError
    from pyhelpers.jsonfiles import write_json_atomic
    from pyhelpers.launch import cluster, ray_nodes, services
    from pyhelpers.launch.ray_nodes import Node
    from pyhelpers.run import events

    head, placed_on = Node("h1", "198.51.100.1", True, True, 4), Node("w1", "198.51.100.2", False, True, 4)
    snapshot = [head, placed_on]  # ALIVE, its port answered by the agent's new raylet
    lp, _, calls, _ = _lost_node_loop(toolkit_env, monkeypatch, lambda *a, **k: list(snapshot))
    monkeypatch.setattr(services, "alive", lambda lay, name: True)
    beat = {"addr": "198.51.100.2", "pid": 4242, "agent_restarts": 0, "attempt": 1, "rejoins": 0}
    node_json = cluster.node_dir(lp.lay, "198.51.100.2") / "node.json"
    node_json.parent.mkdir(parents=True)
    write_json_atomic(node_json, beat)
    write_json_atomic(lp.lay.run_dir / "nodes.json", {"head": {"id": "h1"}, "workers": [
        {"id": "w1", "addr": "198.51.100.2", "alive": True, "gpus": 4, "ray": cluster.ray_generation(lp.lay, "198.51.100.2")}]})
    assert lp._lost_nodes() == []  # the job's own start of the worker's Ray: nothing lost
    write_json_atomic(node_json, {**beat, "rejoins": 1, "ray_started": None})  # its agent starts Ray again
    assert lp._lost_nodes() == ["198.51.100.2 lost (its node agent started its Ray again since the job was placed)"]
    # the rejoined node registered beside the old entry, which Ray still lists as ALIVE
    snapshot.append(Node("w2", "198.51.100.2", False, True, 4))
    write_json_atomic(node_json, beat)
    assert any("old entry" in gap for gap in lp._lost_nodes()), lp._lost_nodes()
    # the job's failure, as slime's driver ended: restarted node-lost (only the job), not `node`
    write_json_atomic(node_json, {**beat, "rejoins": 1})
    snapshot[:] = [head, placed_on]
    waited = []
    monkeypatch.setattr(ray_nodes, "wait_for", lambda *a, **k: waited.append(k["replaced"]()) or [head, snapshot[-1]])
    exc = ToolkitError("slime job x FAILED (exit code 1): ", "round 1", "")
    (lp.lay.logs / "slime-log.log").write_text(
        "ray.exceptions.ActorUnavailableError: The actor 3e97 is unavailable: The actor is temporarily unavailable: "
        "RpcError: RPC error: failed to connect to all addresses; last error: UNKNOWN: ipv4:198.51.100.2:35983: "
        "Failed to connect to remote host: Connection refused rpc_code: 14.\n")
    lp._failed(1, "train", exc)
    restart = [e for e in events.read(lp.lay.run_dir) if e["kind"] == "run-restart"][-1]
    assert restart["cause"] == "node-lost" and calls == ["stop_job"], (restart, calls)
    assert waited == [{"w1"}], waited  # the wait for the cluster never counts the job's old node up


def test_a_node_known_replaced_is_not_counted_up_while_ray_still_lists_it_alive():
    """The wait after a node-lost failure: Ray lists the job's old node ALIVE and its raylet port is
    answered by the agent's new raylet, which has not registered yet. Counted up, the cluster looked
    whole and the next job was placed on a node that no longer exists."""
    import pytest

    from pyhelpers.errors import ToolkitError
    from pyhelpers.launch.ray_nodes import Node, wait_for

    listed = [Node("h1", "198.51.100.1", True, True, 4), Node("w1", "198.51.100.2", False, True, 4)]
    assert wait_for(2, 4, 0, nodes=lambda: listed, poll=0) == listed  # as before: nothing known
    with pytest.raises(ToolkitError, match=r"198.51.100.2 lost \(its raylet does not answer\)"):
        wait_for(2, 4, 0, nodes=lambda: listed, poll=0, replaced=lambda: {"w1"})
    back = [*listed, Node("w2", "198.51.100.2", False, True, 4)]
    with pytest.raises(ToolkitError, match="old entry"):
        wait_for(2, 4, 0, nodes=lambda: back, poll=0, replaced=lambda: {"w1"})
    retired = [listed[0], Node("w1", "198.51.100.2", False, False, 4, "health check failed"), back[-1]]
    assert wait_for(2, 4, 0, nodes=lambda: retired, poll=0, replaced=lambda: {"w1"}) == [listed[0], back[-1]]


def test_a_worker_whose_agent_starts_its_ray_again_during_the_wait_is_not_counted_up_by_its_old_entry(
        toolkit_env, monkeypatch):
    """Issue 41 (CI of bfba987): the worker's raylet killed in round 1. The job failed while the agent
    was still in its pause before starting Ray again: its node.json still named the job's start, so the
    restart's list of replaced nodes was empty. By the wait's first read the agent's new raylet held the
    port (not registered yet) and Ray still listed the old node ALIVE: counted up, the cluster looked
    whole, and the next train stage pinned its storage check to the old node ("doesn't exist any more"),
    which stopped the run as the same failure twice. The wait reads the workers' records again each time."""
    from dataclasses import replace

    from pyhelpers.jsonfiles import write_json_atomic
    from pyhelpers.launch import cluster
    from pyhelpers.launch.ray_nodes import Node
    from pyhelpers.run import events

    head = Node("h1", "198.51.100.1", True, True, 4)
    cut = Node("w0", "198.51.100.2", False, False, 4, "health check failed due to missing too many heartbeats")
    old, new = Node("w1", "198.51.100.2", False, True, 4), Node("w2", "198.51.100.2", False, True, 4)
    reads = []

    def listed(*_a, **_k):
        reads.append(len(reads) + 1)
        if len(reads) == 1:  # the agent's pause ended: it writes its new start, then `ray start` binds the port
            write_json_atomic(node_json, {**beat, "rejoins": 1, "ray_started": None})
        if len(reads) == 1:
            return [head, cut, old]  # the old entry ALIVE, its port answered by the new raylet
        if len(reads) == 2:
            return [head, cut, old, new]  # the new one registered; Ray has not retired the old one yet
        return [head, cut, replace(old, alive=False, why="health check failed"), new]

    lp, exc, calls, lines = _lost_node_loop(toolkit_env, monkeypatch, listed)
    beat = {"addr": "198.51.100.2", "pid": 4242, "agent_restarts": 0, "attempt": 1, "rejoins": 0,
            "ray_started": 1.0}
    node_json = cluster.node_dir(lp.lay, "198.51.100.2") / "node.json"
    node_json.parent.mkdir(parents=True)
    write_json_atomic(node_json, beat)
    write_json_atomic(lp.lay.run_dir / "nodes.json", {"head": {"id": "h1"}, "workers": [
        {"id": "w1", "addr": "198.51.100.2", "alive": True, "gpus": 4, "ray": cluster.ray_generation(lp.lay, "198.51.100.2")}]})
    lp._failed(1, "train", exc)
    restart = [e for e in events.read(lp.lay.run_dir) if e["kind"] == "run-restart"][-1]
    assert restart["cause"] == "node-lost" and calls == ["stop_job"], (restart, calls)
    whole = [e for e in events.read(lp.lay.run_dir) if e["kind"] == "nodes-whole"]
    assert len(reads) == 3 and whole, (reads, lines)  # whole only once Ray retired the old entry
    text = "\n".join(lines)
    assert "old entry" in text, text


def test_a_worker_whose_ray_refuses_the_jobs_calls_is_named_lost_before_ray_sees_it():
    """A worker's raylet killed under the one-job mode's job: the job may die of an
    ActorUnavailableError (gRPC's connection refused to the worker) before Ray's health check
    declares the node dead, while the head still lists it ALIVE. That read as `node` (the restart
    stopped the head's Ray too, instead of waiting for the worker); it names the worker now
    (seen in the two-node story, 2026-12-07)."""
    from pyhelpers.loop import supervisor

    text = ("ray.exceptions.ActorUnavailableError: The actor 8d22 is unavailable: The actor is temporarily "
            "unavailable: RpcError: RPC error: failed to connect to all addresses; last error: UNKNOWN: "
            "ipv4:198.51.100.2:43909: Failed to connect to remote host: Connection refused rpc_code: 14")
    assert supervisor.refused_workers(text, ["198.51.100.2", "198.51.100.3"]) == [
        "198.51.100.2 lost (the job's calls to its Ray were refused)"]
    assert supervisor.refused_workers(text, ["198.51.100.20"]) == []  # another worker, not a prefix of it
    assert supervisor.refused_workers("Connection refused", ["198.51.100.2"]) == []
    f = supervisor.classify_exception("train", 1, step=3, exc=RuntimeError(text))
    assert f.cause != "node-lost"  # by its words alone: it takes the placed workers to name it
    assert supervisor.node_lost(f, "198.51.100.2 lost").cause == "node-lost"
