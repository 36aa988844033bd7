"""The one-job mode on two nodes (issue 44; docs/one-job-mode.md), and what may fail in it.
One slime job trains every round across both nodes' ranks, and its eval hook plays each round's val
and gate inside the RolloutManager, which the stand-in slime places on the worker
(FAKE_SLIME_ROLLOUT_NODE=worker): from there ShopSimulator is only reached through the head's gate,
with the run's token read from the shared run directory. The job holds after round 0's first step
for the head's raylet to be SIGKILLed: `ray-lost`, the head's Ray started again, the worker's agent
joining the new head on its own, a new one-job job from the last checkpoint. Then the worker's
raylet is SIGKILLed while the hook plays round 0's val from the worker: the job fails with its
node, and the evaluate stage plays the rest of the round on the head's eval server, resuming the
hook's episodes (none played twice); the next round waits for the worker's agent to start its node
again. Then the driver's process group is SIGKILLed while round 1's first step holds, and `make
rehearse NNODES=2 RESUME=1` reclaims the killed run's pair with the job in it. (The head's
dashboard and gcs_server lost are the same `ray-lost` path as its raylet: tests/test_fault_matrix.py
on one node, tests/test_one_job.py's story in the mode; not played again here, where a head's
restart on two nodes costs a minute of the worker's reconnect and the suite's CPU.) A module of its own, so that another xdist worker runs it beside the two-node story
(tests/test_two_nodes.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from support.rehearsal import Run, outcome, rehearse_env, start, wait_for
from support.twonode import HEAD, WORKER, need_root, ray_process, slime_log, two_node_outcome

from pyhelpers.procs import procfs

pytestmark = pytest.mark.heavy  # a two-node Ray cluster in network namespaces, its head's Ray lost twice

# The rollouts after which the job holds: round 0's first, for the head's raylet to be SIGKILLed;
# round 1's first, for the driver's process group (then RESUME=1).
HEAD_RAYLET_AFTER, DRIVER_KILLED_AFTER = 0, 2


def test_one_slime_job_on_two_nodes_evaluates_from_the_worker_and_heals_from_every_loss(
        tmp_path, rehearsal_world, reference):
    need_root()
    gate = tmp_path / "hold"
    holds = f"{HEAD_RAYLET_AFTER},{DRIVER_KILLED_AFTER}"
    env = rehearse_env(tmp_path, rehearsal_world, tracked=False, NNODES=2, NUM_GPUS=2, ONE_JOB="1",
                       JOIN_TIMEOUT=300, FAKE_SLIME_ROLLOUT_NODE="worker", RESTART_BACKOFF="0.5",
                       FAKE_SGLANG_LATENCY_MS="40", FAKE_SLIME_HOLD_AT=holds, FAKE_SLIME_HOLD_GATE=str(gate))
    run = Run(tmp_path / "runs")
    record = tmp_path / "runs" / ".rehearsal" / "twonode.json"
    proc, log = start(env)
    now = {"proc": proc, "log": log}  # the driver: the first rehearsal's, then its RESUME=1's

    def waiting(what: str, cond):
        return wait_for(what, cond, proc=now["proc"], log=now["log"])

    def held(step: int) -> Path:
        return Path(f"{gate}-{step}.held")

    def lose_the_heads(what: str, program: bytes, step: int, pair: dict) -> None:
        waiting(f"the job to hold after rollout {step}", held(step).is_file)
        pid = ray_process(pair["head"]["ns"], program)
        assert pid, f"no {what} in the head's namespace"
        driver = int(held(step).read_text().split("(pid ")[1].rstrip(")\n"))  # the held job's driver
        restarts = len(run.restarts())
        os.kill(pid, signal.SIGKILL)
        waiting(f"the run to restart for the head's lost {what}", lambda: len(run.restarts()) > restarts)
        # released once the held driver is gone: the stand-in's driver would write the step's
        # checkpoint itself, where slime's needs its ranks (as in test_two_nodes.py)
        waiting("the held job's driver to end", lambda: not procfs.is_alive(driver))
        Path(f"{gate}-{step}").touch()  # the next job trains the step again and goes on

    pairs = []
    try:
        pairs.append(waiting("the pair of namespaces recorded", lambda: record.is_file() and json.loads(record.read_text())))
        lose_the_heads("raylet", b"/raylet", HEAD_RAYLET_AFTER, pairs[0])
        _lose_the_worker_while_the_hook_plays(run, pairs[0], waiting)
        # a closed terminal while round 1's first step holds: `make rehearse NNODES=2 RESUME=1`
        # reclaims the killed run's pair, the held job in it, and submits a new one-job job
        waiting("round 1's first step", held(DRIVER_KILLED_AFTER).is_file)
        jobs = len(run.events("job-submitted"))
        os.killpg(now["proc"].pid, signal.SIGKILL)
        now["proc"].wait()
        now["proc"], now["log"] = start(env, "--resume")
        waiting("the resumed run's job", lambda: len(run.events("job-submitted")) > jobs)
        Path(f"{gate}-{DRIVER_KILLED_AFTER}").touch()
        pairs.append(json.loads(record.read_text()))
        assert pairs[1]["head"]["ns"] != pairs[0]["head"]["ns"], pairs
        assert now["proc"].wait(timeout=900) == 0, now["log"].read_text()[-6000:]
    finally:
        if now["proc"].poll() is None:
            now["proc"].terminate()
            now["proc"].wait(timeout=120)

    assert [(e["stage"], e["round"], e["cause"]) for e in run.restarts()] == [("train", 0, "ray-lost")], run.restarts()
    assert [(e["round"], e["cause"]) for e in run.events("driver-lost")] == [(1, "killed")], run.events("driver-lost")
    assert all(e["num_rollout"] == 4 for e in run.events("job-submitted")), run.events("job-submitted")
    # the eval server once: for the rest of round 0, whose job died with the worker
    assert [e["round"] for e in run.events("service-start") if e["service"] == "eval-server"] == [0]
    assert [e["round"] for e in run.events("job-end") if e["status"] == "FAILED"][:1] == [0], run.events("job-end")
    slime = slime_log(run)
    assert f"RolloutManager placed on {WORKER}" in slime, slime[-3000:]
    yaml = (run.round_dir(0) / "slime.yaml").read_text()
    assert f"shopsimrl_shopsim_url: http://{HEAD}:" in yaml and "shopsimrl_shopsim_token_path:" in yaml, yaml
    for r in range(2):  # the hook's val and gate of each round, played on the worker, nothing twice
        ids = [json.loads(line)["id"] for line in (run.round_dir(r) / "val" / "episodes.jsonl").read_text().splitlines()]
        assert ids and len(ids) == len(set(ids)), (r, ids)
        assert (run.round_dir(r) / "gate" / "summary.json").is_file()
    assert two_node_outcome(run) == outcome(reference.run)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    assert not [ns for pair in pairs for ns in (pair["head"]["ns"], pair["worker"]["ns"]) if ns in listed], listed


def _lose_the_worker_while_the_hook_plays(run: Run, pair: dict, waiting) -> None:
    """The worker's raylet SIGKILLed once the hook, in the RolloutManager on the worker, has played
    round 0's first val episodes."""
    val = run.round_dir(0) / "val" / "episodes.jsonl"
    waiting("the hook's first val episodes of round 0", lambda: val.is_file() and val.read_text().count("\n") >= 2)
    raylet = ray_process(pair["worker"]["ns"], b"/raylet", pair["worker"]["addr"])
    assert raylet, "no raylet in the worker's namespace"
    os.kill(raylet, signal.SIGKILL)
