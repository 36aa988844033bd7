"""The one-job mode on two nodes (issue 44; docs/one-job-mode.md): one slime job trains every round
across both nodes' ranks, and its eval hook plays each round's val and gate inside the
RolloutManager, which the stand-in slime places on the worker (FAKE_SLIME_ROLLOUT_NODE=worker):
from there ShopSimulator is only reached through the head's gate, with the run's token read from
the shared run directory. A module of its own, so that another xdist worker runs it beside the
two-node story (tests/test_two_nodes.py)."""

from __future__ import annotations

import json
import subprocess

import pytest
from support.rehearsal import Run, outcome, rehearse_env, start, wait_for
from support.twonode import HEAD, WORKER, need_root, slime_log, two_node_outcome

pytestmark = pytest.mark.heavy  # a two-node Ray cluster in network namespaces, one job for both rounds


def test_one_slime_job_on_two_nodes_evaluates_from_the_worker_through_the_gate_to_todays_outcome(
        tmp_path, rehearsal_world, reference):
    need_root()
    env = rehearse_env(tmp_path, rehearsal_world, tracked=False, NNODES=2, NUM_GPUS=2, ONE_JOB="1",
                       JOIN_TIMEOUT=300, FAKE_SLIME_ROLLOUT_NODE="worker")
    run = Run(tmp_path / "runs")
    record = tmp_path / "runs" / ".rehearsal" / "twonode.json"
    proc, log = start(env)
    pair = wait_for("the pair of namespaces recorded", lambda: record.is_file() and json.loads(record.read_text()),
                    proc=proc, log=log)
    assert proc.wait(timeout=900) == 0, log.read_text()[-6000:]
    submitted = run.events("job-submitted")
    assert len(submitted) == 1 and submitted[0]["num_rollout"] == 4, submitted
    assert [e for e in run.events("service-start") if e["service"] == "eval-server"] == []
    slime = slime_log(run)
    assert f"RolloutManager placed on {WORKER}" in slime, slime[-3000:]
    yaml = (run.round_dir(0) / "slime.yaml").read_text()
    assert f"shopsimrl_shopsim_url: http://{HEAD}:" in yaml and "shopsimrl_shopsim_token_path:" in yaml, yaml
    for r in range(2):  # the hook's val and gate of each round, played on the worker
        assert (run.round_dir(r) / "val" / "summary.json").is_file()
        assert (run.round_dir(r) / "gate" / "summary.json").is_file()
    assert two_node_outcome(run) == outcome(reference.run)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    assert not [ns for ns in (pair["head"]["ns"], pair["worker"]["ns"]) if ns in listed], listed
