"""The one-job mode on two nodes (docs/one-job-mode.md), with slime's RolloutManager on the worker.
One slime job trains every round across both nodes' ranks, and its eval hook plays each round's val
and gate inside the RolloutManager, which the stand-in slime places on the worker
(FAKE_SLIME_ROLLOUT_NODE=worker): from there ShopSimulator is only reached through the head's gate,
with the run's token read from the shared run directory. The worker's raylet is SIGKILLed while
the hook plays round 0's val from the worker: the job fails with its node, and the evaluate stage
plays the rest of the round on the head's eval server, resuming the hook's episodes (none played
twice); the next round waits for the worker's agent to start its node again. The mode's other
losses on two nodes -- the head's Ray (its GCS), the driver's process group and `make rehearse
NNODES=2 RESUME=1`, the worker's raylet under training -- are the two-node story's, which runs in
the mode (the default; tests/test_two_nodes.py): not played again here, where each costs a minute
of Ray's restarts and the suite's CPU. A module of its own, so that another xdist worker runs it
beside the two-node story."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest
from support.rehearsal import Run, outcome, rehearse_env, start, wait_for
from support.twonode import HEAD, WORKER, need_root, ray_process, slime_log, two_node_outcome

pytestmark = pytest.mark.heavy  # a two-node Ray cluster in network namespaces, its worker lost


def test_one_slime_job_on_two_nodes_evaluates_from_the_worker_and_heals_from_losing_it(
        tmp_path, rehearsal_world, reference):
    need_root()
    env = rehearse_env(tmp_path, rehearsal_world, tracked=False, NNODES=2, NUM_GPUS=2, ONE_JOB="1",
                       JOIN_TIMEOUT=300, FAKE_SLIME_ROLLOUT_NODE="worker", RESTART_BACKOFF="0.5",
                       FAKE_SGLANG_LATENCY_MS="40")
    run = Run(tmp_path / "runs")
    record = tmp_path / "runs" / ".rehearsal" / "twonode.json"
    proc, log = start(env)

    def waiting(what: str, cond):
        return wait_for(what, cond, proc=proc, log=log)

    try:
        pair = waiting("the pair of namespaces recorded", lambda: record.is_file() and json.loads(record.read_text()))
        _lose_the_worker_while_the_hook_plays(run, pair, waiting)
        assert proc.wait(timeout=900) == 0, log.read_text()[-6000:]
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=120)

    assert run.restarts() == [], run.restarts()  # the job's end in the hook is the evaluate stage's to heal
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
    assert pair["head"]["ns"] not in listed and pair["worker"]["ns"] not in listed, listed


def _lose_the_worker_while_the_hook_plays(run: Run, pair: dict, waiting) -> None:
    """The worker's raylet SIGKILLed once the hook, in the RolloutManager on the worker, has played
    round 0's first val episodes."""
    val = run.round_dir(0) / "val" / "episodes.jsonl"
    waiting("the hook's first val episodes of round 0", lambda: val.is_file() and val.read_text().count("\n") >= 2)
    raylet = ray_process(pair["worker"]["ns"], b"/raylet", pair["worker"]["addr"])
    assert raylet, "no raylet in the worker's namespace"
    os.kill(raylet, signal.SIGKILL)
