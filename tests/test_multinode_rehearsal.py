"""A worker lost mid-round (issue 28 item 8; docs/multinode.md §7): the slime job on a real two-node Ray
cluster on this host -- two network namespaces joined by a veth pair (pyhelpers/procs/netns.py), the
head's rehearsal in one, a worker's `make join` in the other, token auth on, the RolloutManager (with
the rollout plugin) pinned to the worker. Its raylet is killed mid-round; the worker rejoins and the
run must end exactly as the one-node reference rehearsal does (the stand-ins are deterministic, and
where an episode is played must not change it). The uninterrupted two-node rehearsal is
tests/test_two_nodes.py's."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT
from support.rehearsal import Run, outcome, pyhelpers_cmd, rehearse_env, wait_for
from support.twonode import WORKER, two_node_outcome

pytestmark = [pytest.mark.heavy,
              pytest.mark.skipif(os.geteuid() != 0, reason="two network namespaces need root (CI runs as root)")]

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
    assert two_node_outcome(run) == outcome(reference.run)  # resumed from the last checkpoint, nothing counted twice
