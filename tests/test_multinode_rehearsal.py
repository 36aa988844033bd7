"""The slime job on a real two-node Ray cluster on this host (issue 28 items 4-6, 8; docs/multinode.md
§7-§8): two network namespaces joined by a veth pair (pyhelpers/procs/netns.py), the head's rehearsal
in one, a worker's `make join` in the other, token auth on. The stand-in slime places its ranks on
both nodes as slime does, records what each saw, and pins its RolloutManager -- with the rollout
plugin in it -- to the worker (FAKE_SLIME_ROLLOUT_NODE=worker), so every episode reaches ShopSimulator
from the other node, through the gate.

Two rehearsals in all: an uninterrupted one, and one whose worker's raylet is killed mid-round and
rejoins; both must end exactly as the one-node reference rehearsal does (the stand-ins are
deterministic, and where an episode is played must not change it)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT
from support.rehearsal import Run, outcome, pyhelpers_cmd, rehearse, rehearse_env, wait_for

pytestmark = [pytest.mark.heavy,
              pytest.mark.skipif(os.geteuid() != 0, reason="two network namespaces need root (CI runs as root)")]

HEAD, WORKER = "198.51.100.1", "198.51.100.2"
# A proxy in the user's shell: the job must never see it (the SGLang router would use it).
# (no_proxy covers loopback, as a user's would: the analyst's model stand-in listens there and the
# analyst, which talks to DashScope, honours the proxy -- it is not part of the job.)
PROXIES = {"http_proxy": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "no_proxy": "localhost,127.0.0.1"}


def _outcome(run: Run) -> dict:
    """outcome() without the head's shared-storage nonce (cluster.NONCE_NAME), which only a multi-node
    run leaves under TRAIN_SAVE."""
    from pyhelpers.launch.cluster import NONCE_NAME

    out = outcome(run)
    out["weights"] = {k: v for k, v in out["weights"].items() if k != NONCE_NAME}
    return out


def _slime_log(run: Run) -> str:
    return (run.run_dir / "logs" / "slime-log.log").read_text(errors="replace")


def _ranks(log: str) -> dict[str, str]:
    """rank -> its line, from the stand-in's records (one job's worth: the last of each rank)."""
    out = {}
    for line in log.splitlines():
        if line.startswith("fake slime: rank "):
            out[line.split()[3]] = line
    return out


def test_two_nodes_place_ranks_on_both_the_plugin_plays_from_the_worker_and_the_run_ends_as_on_one(
        tmp_path, rehearsal_world, reference):
    env = rehearse_env(tmp_path, rehearsal_world, NNODES="2", FAKE_SLIME_ROLLOUT_NODE="worker", **PROXIES)
    res = rehearse(env, timeout=1200)
    assert res.returncode == 0, res.stdout[-6000:]
    run = Run(tmp_path / "runs")
    log = _slime_log(run)
    ranks = _ranks(log)
    n = len(ranks)
    assert n >= 2 and sorted(ranks, key=int) == [str(r) for r in range(n)], log[-3000:]
    on = {int(r): line.split()[5].rstrip(":") for r, line in ranks.items()}
    # both nodes, NUM_GPUS ranks each, the head's first (slime sorts the bundles by node IP)
    assert [on[r] for r in range(n)] == [HEAD] * (n // 2) + [WORKER] * (n // 2), ranks
    for r, line in ranks.items():  # each rank saw its own node's address and interface, and no proxy
        assert f"SLIME_HOST_IP={on[int(r)]} " in line and "proxies=none" in line, line
        assert "NCCL_SOCKET_IFNAME==" in line and "GLOO_SOCKET_IFNAME=" in line, line
    assert f"RolloutManager placed on {WORKER}" in log, log[-3000:]
    assert f"RolloutManager on {WORKER}: SLIME_HOST_IP={WORKER} proxies=none" in log, log[-3000:]
    # the plugin, on the worker, played every step's episodes through ShopSimulator's gate
    metrics = [line for r in range(2) for line in (run.round_dir(r) / "rollout_metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 4, metrics
    yaml = (run.round_dir(0) / "slime.yaml").read_text()
    assert f"shopsimrl_shopsim_url: http://{HEAD}:" in yaml and "shopsimrl_shopsim_token_path:" in yaml, yaml
    assert _outcome(run) == outcome(reference.run)
    # W&B: slime's own run records the job's node count in its config (slime/observability/wandb_utils.py:58)
    assert _wandb_actor_num_nodes(run) == ["2"]
    report = (run.run_dir / "report" / "index.html").read_text()
    assert "on 2 node(s) of" in report


def _wandb_actor_num_nodes(run: Run) -> list[str]:
    """actor_num_nodes as W&B's offline runs of the rehearsal recorded it (read with W&B's own reader)."""
    import json
    import re

    from conftest import wandb_records

    found = []
    for offline in sorted((run.run_dir / "wandb" / "wandb").glob("offline-run-*")):
        text = "\n".join(json.dumps(rec) for rec in wandb_records(offline))
        found += re.findall(r'actor_num_nodes\\?"[^0-9]{0,40}?(\d+)', text)
    return sorted(set(found))


# --- a worker lost mid-round ------------------------------------------------------------------

def _raylet_of(addr: str, netns_name: str) -> int | None:
    """The pid of the raylet serving node `addr` inside network namespace `netns_name` (only ours: another
    rehearsal on this host may have a worker at the same address in its own namespace)."""
    ns = os.stat(f"/run/netns/{netns_name}").st_ino
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
            if os.stat(p / "ns" / "net").st_ino != ns:
                continue
        except OSError:
            continue
        if argv and argv[0].endswith(b"/raylet") and f"--node_ip_address={addr}".encode() in argv:
            return int(p.name)
    return None


def test_a_worker_whose_raylet_is_killed_mid_round_rejoins_and_the_run_resumes_to_the_same_result(
        tmp_path, rehearsal_world, reference):
    from pyhelpers.procs import netns

    env = rehearse_env(tmp_path, rehearsal_world, NNODES="2", FAKE_SLIME_ROLLOUT_NODE="worker",
                       FAKE_SLIME_STEP_DELAY="2", JOIN_TIMEOUT="300", RESTART_BACKOFF="0.5")
    run = Run(tmp_path / "runs")
    rehearse_bin = str(ROOT / "bin" / "rehearse")
    pair = netns.Pair.create()
    head_env = {**env, "SHOPSIMRL_NODE_ROLE": "head", "NODE_ADDR": pair.head.addr, "NET_IFACE": pair.head.iface}
    worker_env = {**env, "SHOPSIMRL_NODE_ROLE": "worker", "NODE_ADDR": pair.worker.addr,
                  "NET_IFACE": pair.worker.iface, "HEAD_ADDR": pair.head.addr}
    logs = tmp_path / "logs"
    logs.mkdir()

    def join(n: int) -> subprocess.Popen:
        return subprocess.Popen(pair.worker.exec_argv([rehearse_bin, "--env", str(ROOT / "bin" / "join")]),
                                env=worker_env, cwd=ROOT, stdout=open(logs / f"join-{n}.log", "w"),
                                stderr=subprocess.STDOUT, start_new_session=True)

    head_log = logs / "head.log"
    try:
        head = subprocess.Popen(pair.head.exec_argv([rehearse_bin]), env=head_env, cwd=ROOT,
                                stdout=open(head_log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
        first = join(1)
        metrics = run.round_dir(1) / "rollout_metrics.jsonl"
        wait_for("round 1's first step", lambda: metrics.is_file() and metrics.read_text().strip(), timeout=900,
                 proc=head, log=head_log)
        raylet = wait_for("the worker's raylet", lambda: _raylet_of(WORKER, pair.worker.ns), timeout=30)
        os.kill(raylet, signal.SIGKILL)
        wait_for("the node-lost restart", lambda: [e for e in run.events("run-restart") if e["cause"] == "node-lost"],
                 timeout=300, proc=head, log=head_log)
        status = subprocess.run(pair.head.exec_argv([rehearse_bin, "--env", *pyhelpers_cmd("run", "status")]),
                                env=head_env, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert f"MISSING: {WORKER} lost" in status.stdout, status.stdout + status.stderr
        first.wait(timeout=120)  # the worker's `make join` ends with its raylet
        second = join(2)  # the worker comes back
        assert head.wait(timeout=900) == 0, head_log.read_text(errors="replace")[-6000:]
        assert second.wait(timeout=120) == 0  # the rejoined worker served the rest of the run, then stopped with it
    finally:
        subprocess.run(pair.worker.exec_argv([rehearse_bin, "--env", str(ROOT / "bin" / "leave")]), env=worker_env,
                       cwd=ROOT, capture_output=True, timeout=120)
        pair.remove()
    restarts = run.events("run-restart")
    assert [(e["stage"], e["round"], e["cause"]) for e in restarts] == [("train", 1, "node-lost")], restarts
    assert run.events("nodes-whole"), run.events()[-10:]
    text = head_log.read_text(errors="replace")
    assert "(JOIN_TIMEOUT) for the cluster to be whole" in text, text[-4000:]
    assert f"node {WORKER} worker, 4 GPU(s), alive" in text, text[-4000:]
    assert _outcome(run) == outcome(reference.run)  # resumed from the last checkpoint, nothing counted twice
