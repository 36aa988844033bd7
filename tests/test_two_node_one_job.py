"""The one-job mode on two nodes (issue 44; docs/one-job-mode.md), with the head's Ray lost twice.
One slime job trains every round across both nodes' ranks, and its eval hook plays each round's val
and gate inside the RolloutManager, which the stand-in slime places on the worker
(FAKE_SLIME_ROLLOUT_NODE=worker): from there ShopSimulator is only reached through the head's gate,
with the run's token read from the shared run directory. The job holds after round 0's first step
for the head's raylet to be SIGKILLed, and after round 1's last for the head's dashboard (the job
API the driver watches the job through): each is `ray-lost`, the head's Ray started again, the
worker's agent joining the new head on its own, a new one-job job from the last checkpoint. Between
the two, the worker's raylet is SIGKILLed while the hook plays round 0's val from the worker: the
job fails with its node, and the evaluate stage plays the rest of the round on the head's eval
server, resuming the hook's episodes (none played twice); the next round waits for the worker's
agent to start its node again. A module of its own, so that another xdist worker runs it beside the two-node story
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

# (what is killed on the head, the program's path's end, the rollout after which the job holds for it)
FAULTS = (("raylet", b"/raylet", 0), ("dashboard", b"/dashboard/dashboard.py", 3))


def test_one_slime_job_on_two_nodes_evaluates_from_the_worker_and_heals_from_its_heads_lost_ray(
        tmp_path, rehearsal_world, reference):
    need_root()
    gate = tmp_path / "hold"
    env = rehearse_env(tmp_path, rehearsal_world, tracked=False, NNODES=2, NUM_GPUS=2, ONE_JOB="1",
                       JOIN_TIMEOUT=300, FAKE_SLIME_ROLLOUT_NODE="worker", RESTART_BACKOFF="0.5", FAKE_SGLANG_LATENCY_MS="40",
                       FAKE_SLIME_HOLD_AT=",".join(str(step) for _, _, step in FAULTS), FAKE_SLIME_HOLD_GATE=str(gate))
    run = Run(tmp_path / "runs")
    record = tmp_path / "runs" / ".rehearsal" / "twonode.json"
    proc, log = start(env)
    try:
        pair = wait_for("the pair of namespaces recorded", lambda: record.is_file() and json.loads(record.read_text()),
                        proc=proc, log=log)
        for n, (what, program, step) in enumerate(FAULTS, start=1):
            if n == 2:
                _lose_the_worker_while_the_hook_plays(run, pair, proc, log)
            held = Path(f"{gate}-{step}.held")
            wait_for(f"the job to hold after rollout {step}", held.is_file, proc=proc, log=log)
            pid = ray_process(pair["head"]["ns"], program)
            assert pid, f"no {what} in the head's namespace"
            driver = int(held.read_text().split("(pid ")[1].rstrip(")\n"))  # the held job's driver
            os.kill(pid, signal.SIGKILL)
            wait_for(f"the run to restart for the head's lost {what}", lambda n=n: len(run.restarts()) >= n,
                     proc=proc, log=log)
            # released once the held driver is gone: the stand-in's driver would write the step's
            # checkpoint itself, where slime's needs its ranks (as in test_two_nodes.py)
            wait_for("the held job's driver to end", lambda d=driver: not procfs.is_alive(d), proc=proc, log=log)
            Path(f"{gate}-{step}").touch()  # the next job trains the step again and goes on
        assert proc.wait(timeout=900) == 0, log.read_text()[-6000:]
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=120)

    assert [(e["stage"], e["round"], e["cause"]) for e in run.restarts()] == [
        ("train", 0, "ray-lost"), ("train", 1, "ray-lost")], run.restarts()
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
    assert not [ns for ns in (pair["head"]["ns"], pair["worker"]["ns"]) if ns in listed], listed


def _lose_the_worker_while_the_hook_plays(run: Run, pair: dict, proc, log) -> None:
    """The worker's raylet SIGKILLed once the hook, in the RolloutManager on the worker, has played
    round 0's first val episodes."""
    val = run.round_dir(0) / "val" / "episodes.jsonl"
    wait_for("the hook's first val episodes of round 0", lambda: val.is_file() and val.read_text().count("\n") >= 2,
             proc=proc, log=log)
    raylet = ray_process(pair["worker"]["ns"], b"/raylet", pair["worker"]["addr"])
    assert raylet, "no raylet in the worker's namespace"
    os.kill(raylet, signal.SIGKILL)
