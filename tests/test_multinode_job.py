"""The slime job across nodes (issue 28 items 5, 6, 8, 9): its command lines, its environment, the
doctor's InfiniBand warning, the `node-lost` restart rule. NNODES=1 stays byte-identical to the
one-node toolkit (tests/golden/plan-one-node.txt, written by the toolkit before multi-node existed)."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import ROOT

from pyhelpers.config import load as config
from pyhelpers.run import plan as runplan
from pyhelpers.run.layout import from_config

GOLDEN = ROOT / "tests" / "golden"
MODEL_ARGS = ["--num-layers", "32"]


def _plan_text(env: dict, tmp_path: Path) -> str:
    """`make plan`'s lines with this test's own paths and the machine's free space made neutral."""
    cfg = config.load(env)
    text = "\n".join(runplan.plan(cfg, from_config(cfg), model_args=MODEL_ARGS)) + "\n"
    text = text.replace(cfg.ray_temp_dir, "<RAY_TEMP>").replace(str(tmp_path), "<TMP>").replace(str(ROOT), "<ROOT>")
    return re.sub(r"[0-9.]+ GB free", "<N> GB free", text)


def test_a_one_node_plan_is_byte_identical_to_the_one_node_toolkits(toolkit_env, tmp_path):
    assert _plan_text(toolkit_env, tmp_path) == (GOLDEN / "plan-one-node.txt").read_text()


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
    ctx = Context(config.load(env), env)
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
