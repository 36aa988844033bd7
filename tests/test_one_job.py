"""The one-job mode (ONE_JOB=1, the default; docs/one-job-mode.md) end to end on the stand-ins: one
slime job trains both rounds of a rehearsal, evaluates each in the job through the plugin's eval hook
(no eval server), waits inside the job for round 1's bank, and ends with the same banks, summaries,
spool and checkpoint bytes as the shared reference rehearsal, through a simulator killed under its
hook, a driver killed during the in-job evaluation, and a chain of kills. (The round-by-round order,
ONE_JOB=0, reaches the same outcome through tests/test_faults.py's chain.)"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from support.rehearsal import (
    Run,
    assert_stopped,
    event_seen,
    group_alive,
    kill_driver,
    outcome,
    recorded_groups,
    rehearse,
    rehearse_env,
    start,
    wait_for,
)


@pytest.mark.heavy
def test_one_slime_job_trains_and_evaluates_every_round_with_the_simulator_killed_under_its_hook(tmp_path, rehearsal_world, reference):
    """And ShopSimulator SIGKILLed while the hook plays round 0's val (compile held until the
    simulator is back): the watchdog of the evaluate stage's wait starts it again, the hook's
    episodes wait for it (SHOPSIM_START_TIMEOUT) as the eval server's do, nothing else changes. (It
    was not started again outside the train stage: the hook waited out its 900 s per try.)"""
    hold = tmp_path / "analyst-may-answer"
    env = rehearse_env(tmp_path, rehearsal_world, ONE_JOB="1", FAKE_SGLANG_LATENCY_MS="40", FAKE_ANALYST_HOLD_UNTIL=hold,
                       FAKE_ANALYST_DELAY_S="2", ANALYST_TIMEOUT="900", ANALYST_DRAIN_TIMEOUT="900")
    run = Run(tmp_path / "runs")
    proc, log = start(env)
    val = run.round_dir(0) / "val" / "episodes.jsonl"
    wait_for("the hook's first val episode", lambda: val.is_file() and val.read_text().count("\n") >= 1,
             proc=proc, log=log)
    os.killpg(recorded_groups(run)["shopsim"], signal.SIGKILL)
    wait_for("the simulator started again", lambda: event_seen(run, "service-restart", service="shopsim", round=0),
             proc=proc, log=log)
    hold.touch()
    assert proc.wait(timeout=900) == 0, log.read_text()[-6000:]
    assert [(e["round"], e["count"]) for e in run.events("service-restart")] == [(0, 1)]
    submitted = run.events("job-submitted")
    assert len(submitted) == 1 and submitted[0]["num_rollout"] == 4, submitted
    assert [e["service"] for e in run.events("service-start") if e["service"] == "eval-server"] == []
    assert [(e["kind"], e["round"]) for e in run.events() if e["kind"] in ("bank-wait", "bank-in")] == \
        [("bank-wait", 1), ("bank-in", 1)]
    ends = run.events("job-end")
    assert [(e["round"], e["status"]) for e in ends] == [(1, "SUCCEEDED")], ends
    assert outcome(run) == outcome(reference.run)


def test_the_one_job_mode_refuses_what_it_cannot_run_before_anything_starts(toolkit_env):
    from pyhelpers.config import check, load

    def errors(**knobs):
        cfg = load.load({**toolkit_env, **knobs})
        return {p.var: p.message for p in check.check(cfg) if p.level == "error" and p.var == "ONE_JOB"}

    assert errors(ONE_JOB="1") == {}
    assert "SAVE_HF=0" in errors(ONE_JOB="1", SAVE_HF="1")["ONE_JOB"]
    # (a multi-node run's hook reaches the simulator through the head's gate: test_two_node_one_job.py)
    assert errors(ONE_JOB="1", NNODES="2") == {}


@pytest.mark.heavy
def test_a_driver_killed_during_the_in_job_evaluation_resumes_it_on_the_eval_server_playing_nothing_twice(
        tmp_path, rehearsal_world, reference):
    """The job's eval hook has played round 0's val and waits for compiled.json (the analyst's model
    holds compile until a gate file exists) when the driver is SIGKILLed. The resume stops the
    orphaned job, plays what the hook left -- the gate -- on the eval server, keeping the hook's val
    episodes (none played again), submits a new one-job job from round 1, and ends with today's
    order's outcome."""
    gate_file = tmp_path / "analyst-may-answer"
    env = rehearse_env(tmp_path, rehearsal_world, ONE_JOB="1", FAKE_ANALYST_HOLD_UNTIL=gate_file,
                       FAKE_ANALYST_DELAY_S="2", ANALYST_TIMEOUT="900", ANALYST_DRAIN_TIMEOUT="900")
    run = Run(tmp_path / "runs")
    val = run.round_dir(0) / "val"

    def hook_waits_for_compile():
        return (val / "summary.json").is_file() and event_seen(run, "stage-start", round=0, stage="compile")
    proc, log = start(env)
    wait_for("round 0's in-job val, compile held", hook_waits_for_compile, proc=proc, log=log)
    assert not (run.round_dir(0) / "compiled.json").exists() and not (run.round_dir(0) / "gate").exists()
    kill_driver(run)
    proc.wait(timeout=300)  # bin/rehearse returns once its driver is gone
    orphans = {name: pgid for name, pgid in recorded_groups(run).items() if group_alive(pgid)}
    played = [json.loads(line)["id"] for line in (val / "episodes.jsonl").read_text().splitlines()]
    gate_file.touch()

    res = rehearse(env, "--resume")
    assert res.returncode == 0, res.stdout[-5000:]
    assert_stopped(orphans)
    ids = [json.loads(line)["id"] for line in (val / "episodes.jsonl").read_text().splitlines()]
    assert ids == played and len(ids) == len(set(ids))  # the hook's val kept, nothing played again
    val_played = [e["played"] for e in run.events("episodes") if e["what"] == "val" and e["round"] == 0]
    assert sum(val_played) == len(ids), val_played
    servers = [e for e in run.events("service-start") if e["service"] == "eval-server"]
    assert len(servers) == 1  # the resume's gate of round 0; round 1 evaluated in its new job
    submitted = run.events("job-submitted")
    assert [(e["round"], e["num_rollout"]) for e in submitted] == [(0, 4), (1, 4)], submitted
    assert outcome(run) == outcome(reference.run)


@pytest.mark.heavy
def test_the_one_job_mode_killed_mid_export_then_mid_training_ends_as_the_reference(
        tmp_path, rehearsal_world, reference):
    """Issue 44's kill matrix and self-healing in the mode, beside the in-job evaluation's kill
    above, in one rehearsal: the driver SIGKILLed while round 0's export converts (the job's eval
    hook then plays val or waits for compile, the job waits for round 1's bank), resumed;
    SIGKILLed again once the resumed run's job trained round 1's first step (held there), resumed.
    Each resume stops what the killed driver left (the job inside its Ray too), no val episode is
    played twice, and the run ends with the reference's outcome. (The head's Ray lost in the mode
    is the fault matrix's, tests/test_fault_matrix.py, which runs in the mode: the default.)"""
    gate = tmp_path / "hold"
    env = rehearse_env(tmp_path, rehearsal_world, ONE_JOB="1", FAKE_CONVERT_DELAY="3", RESTART_BACKOFF="0.5",
                       FAKE_SLIME_HOLD_AT="2", FAKE_SLIME_HOLD_GATE=str(gate))
    run = Run(tmp_path / "runs")

    def kill(proc) -> dict[str, int]:
        kill_driver(run)
        proc.wait(timeout=300)  # bin/rehearse returns once its driver is gone
        return {name: pgid for name, pgid in recorded_groups(run).items() if group_alive(pgid)}

    def held(step: int) -> Path:  # written by a job once it trained rollout `step`, which then waits
        return Path(f"{gate}-{step}.held")

    proc, log = start(env)
    wait_for("round 0's conversion", lambda: event_seen(run, "convert-start", round=0), proc=proc, log=log)
    orphans = kill(proc)
    assert "ray-head" in orphans, orphans

    proc, log = start(env, "--resume")
    wait_for("round 1's first step in the resumed run's job", held(2).is_file, proc=proc, log=log)
    assert_stopped(orphans)
    job = run.events("job-submitted")[-1]
    assert (job["round"], job["num_rollout"]) == (1, 4), job
    orphans = kill(proc)

    proc, log = start(env, "--resume")
    wait_for("the resume to stop what the second kill left",
             lambda: not any(group_alive(pgid) for pgid in orphans.values()), proc=proc, log=log)
    Path(f"{gate}-2").touch()  # the next job trains rollout 2 without holding
    assert proc.wait(timeout=900) == 0, log.read_text()[-5000:]

    assert run.restarts() == [], run.restarts()  # a killed driver is resumed, not restarted
    for r in (0, 1):
        ids = [json.loads(line)["id"] for line in (run.round_dir(r) / "val" / "episodes.jsonl").read_text().splitlines()]
        assert ids and len(ids) == len(set(ids)), (r, ids)  # nothing played twice
    assert [e["cause"] for e in run.events("driver-lost")] == ["killed", "killed"], run.events("driver-lost")
    assert outcome(run) == outcome(reference.run)


def test_the_head_s_ray_lost_while_the_hook_evaluates_is_ray_lost_not_a_bug(toolkit_env, monkeypatch):
    """The evaluate stage of the mode waits for the hook's summaries on the job's API: a head whose
    Ray died meanwhile (the OOM killer) is `ray-lost`, transient -- the restart stops what is left
    and the resume plays the round's rest on the eval server -- not a ConnectionError the
    supervisor takes for a bug that ends the run for good."""
    from pyhelpers.config.load import load
    from pyhelpers.launch import rayjob
    from pyhelpers.loop.supervisor import TRANSIENT, classify_exception
    from pyhelpers.run.layout import from_config
    from pyhelpers.stages import one_job

    class DeadHead:  # the job API of a head whose Ray is gone
        def __init__(self, *_a, **_k):
            pass

        def info(self, _job_id):
            raise ConnectionError("Connection refused")

        def stop(self, _job_id):
            raise ConnectionError("Connection refused")

    cfg = load({**toolkit_env, "ONE_JOB": "1"})
    lay = from_config(cfg)
    job = {"submission_id": "rehearsal-r000-1", "dashboard_port": cfg.RAY_DASHBOARD_PORT, "one_job": True}
    monkeypatch.setattr(one_job, "running_job", lambda _cfg, _lay: job)  # (it ran when the stage asked)
    monkeypatch.setattr(rayjob, "JobApi", DeadHead)
    with pytest.raises(Exception) as err:  # noqa: PT011 - what it is, is the test
        one_job.evaluated_in_job(cfg, lay, 0, lambda: False, lambda _line: None)
    f = classify_exception("evaluate", 0, step=None, exc=err.value)
    assert (f.cause, f.kind) == ("ray-lost", TRANSIENT), (f, err.value)
