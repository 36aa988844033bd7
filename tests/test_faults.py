"""The fault matrix of the training loop: the driver SIGKILLed at each stage of round 1 (mid-train,
between stages, mid-export, mid-evaluate), each time `make resume` (bin/rehearse --resume) stops
the orphans and continues; no checkpoint is lost at any point, and the end result equals the
uninterrupted reference rehearsal's. Also the memo's example (M14): round 1 trained, no val/gate
yet -> `make resume ROUND=1` continues at rotate; ROUND=0 or 2 is refused, changing nothing. And
what a user sees after the first kill (issue 20): `make status` names the orphans and the job still
running without its driver, the report shows the kill, the job's unsupervised end is recorded.

The kills are chained in one run (kill, resume, kill the resumed driver, ...) so round 0 plays
once: the same four kill points, and each resume starts from an earlier kill's leftovers."""

from __future__ import annotations

import json
import re
from pathlib import Path

from support.rehearsal import (
    NO_WANDB,
    Run,
    assert_stopped,
    event_seen,
    file_digests,
    frozen,
    group_alive,
    in_rehearsal,
    kill_driver,
    newest_complete,
    outcome,
    pyhelpers_cmd,
    recorded_groups,
    rehearse,
    rehearse_env,
    rows,
    start,
    wait_for,
)


def _kill_and_check(run: Run, proc, min_ckpt: int) -> dict[str, int]:
    """Kill the driver; the services it started live on (orphans); no checkpoint was lost."""
    kill_driver(run)
    proc.wait(timeout=300)  # bin/rehearse itself returns once its driver is gone
    groups = recorded_groups(run)  # after the kill: a service started just before it is recorded too
    newest = newest_complete(run)
    assert newest is not None and newest >= min_ckpt
    tracked = int((run.save_dir / "megatron" / "latest_checkpointed_iteration.txt").read_text())
    assert (run.save_dir / "megatron" / f"iter_{tracked:07d}" / ".metadata").is_file()
    return {name: pgid for name, pgid in groups.items() if group_alive(pgid)}


def _status_names_the_orphans_and_the_report_shows_the_kill(env, run: Run, job_held: Path) -> str:
    """Right after the driver's kill in round 1's training: `make status` names every orphan and the
    job that still runs (held until the gate file `job_held` exists); once that job ends on its
    own, the report (before any resume) shows the kill. Returns the job's id."""
    st = in_rehearsal(env, *pyhelpers_cmd("run", "status"))
    assert st.returncode == 0, st.stderr
    out = st.stdout
    assert "driver: not running" in out and "died (killed?) during round 1 train" in out
    for name in ("shopsim", "ray-head"):
        assert any(line.split()[:2] == [name, "orphaned"] for line in out.splitlines()), out
    # Nothing reads "up" beside a dead driver: the state column of every service line.
    services = out.split("services:", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    states = {line.split()[0]: line.split()[1] for line in services if line.startswith("  ") and len(line.split()) > 1}
    assert states and "up" not in states.values(), out
    job_id = run.events("job-submitted")[-1]["job_id"]  # (ONE_JOB=1: the run's one job, submitted in round 0)
    assert "ORPHANED: the driver is gone but" in out and f"slime job {job_id}" in out
    assert "`make rehearse RESUME=1` stops them" in out and "(`make stop REHEARSAL=1` only stops them)" in out
    assert "make resume" not in out  # a rehearsal's hints name the rehearsal's commands

    job_held.touch()
    wait_for("the orphaned job to end", lambda: "succeeded" in in_rehearsal(
        env, *pyhelpers_cmd("run", "status")).stdout, timeout=300)
    rep = in_rehearsal(env, *pyhelpers_cmd("run", "report"))
    assert rep.returncode == 0, rep.stderr
    report = run.run_dir / "report"
    assert [(r["kind"], r["round"], r["stage"]) for r in rows(report / "restarts.csv")] == [("driver-lost", "1", "train")]
    assert ("1", "train", "killed") in {(r["round"], r["stage"], r["status"]) for r in rows(report / "timeline.csv")}
    assert "No restarts or failures recorded" not in (report / "index.html").read_text()
    return job_id


def _resume_and_kill_at(env, run: Run, orphans: dict[str, int], what: str, cond, min_ckpt: int,
                        *args: str) -> tuple[dict[str, int], str]:
    """`make resume [args]`, wait for `cond(since)`, check the previous orphans are gone, kill;
    returns the new orphans and the resumed driver's output."""
    since = len(run.events())
    proc, log = start(env, "--resume", *args)
    wait_for(what, cond(since), proc=proc, log=log)
    assert_stopped(orphans)  # the resume stopped every orphan of the previous kill
    return _kill_and_check(run, proc, min_ckpt), log.read_text()


def test_kills_at_every_stage_of_round_1_resume_to_the_uninterrupted_result(tmp_path, rehearsal_world, reference):
    # Round 1's job holds before its last step (rollout 3) until the gate file exists: it outlives
    # the driver's kill until `make status` has seen it, however slow a loaded machine runs that.
    job_held = tmp_path / "job-may-go-on"
    # The round-by-round order (ONE_JOB=0), against the reference of the default (ONE_JOB=1): its
    # orphaned job ends on its own once it trained round 1 (the one-job mode's would evaluate the
    # round and wait for a compile no driver makes; its kills: tests/test_one_job.py)
    env = rehearse_env(tmp_path, rehearsal_world, ONE_JOB="0", FAKE_SLIME_HOLD_BEFORE=f"3:{job_held}", FAKE_SLIME_STEP_DELAY="2",
                       FAKE_CONVERT_DELAY="3", FAKE_SGLANG_LATENCY_MS="30")
    run = Run(tmp_path / "runs")

    # 1. mid-train: round 1's job has started training, and round 1's train stage its analyst (with
    # ONE_JOB=1 the run's one job may start round 1 once inject wrote its bank, before the driver's
    # train stage of round 1 has started anything).
    proc, log = start(env)
    wait_for("round 1 training", lambda: (run.round_dir(1) / "plugin.started").is_file()
             and event_seen(run, "stage-start", round=1, stage="train") and "analyst" in recorded_groups(run),
             proc=proc, log=log)
    orphans = _kill_and_check(run, proc, min_ckpt=1)
    assert {"shopsim", "ray-head", "analyst"} <= set(orphans)
    job_id = _status_names_the_orphans_and_the_report_shows_the_kill(env, run, job_held)

    # 2. between stages: round 1's training just ended (next: rotate, export). On a loaded machine
    # the orphaned job may finish its last step before the resume stops it; the resume then starts
    # at rotate, which is the same point between the two stages.
    def between_train_and_rotate(since):
        return lambda: (event_seen(run, "stage-end", since, round=1, stage="train")
                        or event_seen(run, "stage-start", since, round=1, stage="rotate"))
    orphans, _ = _resume_and_kill_at(env, run, orphans, "round 1's train stage to end", between_train_and_rotate, 1)

    # The memo's example: round 1 has its checkpoint (iteration 3) but no val/gate.
    assert int((run.save_dir / "megatron" / "latest_checkpointed_iteration.txt").read_text()) == 3
    with frozen(orphans):  # the kill may land as export's converter starts: it would write on
        before = file_digests(run.run_dir), file_digests(run.save_dir)
        for wrong, says in (("0", "round 0 is already finished; the run stands at round 1"),
                            ("2", "ROUND=2 is outside this run's rounds 0..1")):
            res = rehearse(env, "--resume", "--round", wrong, timeout=300)
            assert res.returncode == 1 and says in res.stdout, res.stdout[-3000:]
        after = file_digests(run.run_dir), file_digests(run.save_dir)
    changed = [k for b, a in zip(before, after, strict=True) for k in sorted(set(b) | set(a)) if b.get(k) != a.get(k)]
    assert not changed, f"a refused resume changed {changed}"

    # 3. mid-export, resumed with ROUND=1 as the memo does.
    orphans, out = _resume_and_kill_at(env, run, orphans, "round 1's conversion",
                                       lambda since: lambda: event_seen(run, "convert-start", since, round=1), 3,
                                       "--round", "1")
    assert re.search(r"resuming rehearsal: round 1 at (rotate|export)", out)

    # 4. mid-evaluate: the round's bare val has played some episodes.
    def val_started(since):
        path = run.round_dir(1) / "val" / "episodes.jsonl"
        return lambda: path.is_file() and path.read_text().count("\n") >= 1
    orphans, _ = _resume_and_kill_at(env, run, orphans, "round 1's val episodes", val_started, 3)
    assert "eval-server" in orphans

    # The last resume finishes the run, with the uninterrupted run's results.
    res = rehearse(env, "--resume")
    assert res.returncode == 0, res.stdout[-5000:]
    assert_stopped(orphans)
    assert event_seen(run, "stage-end", round=1, stage="inject", status=0)
    assert outcome(run) == outcome(reference.run)
    # The first resume recorded the job's end without its driver; the report lists every kill.
    assert event_seen(run, "job-end-unsupervised", job_id=job_id, status="SUCCEEDED")
    kinds = [(r["kind"], r["stage"]) for r in rows(run.run_dir / "report" / "restarts.csv")]
    assert ("driver-lost", "train") in kinds and ("job-end-unsupervised", "") in kinds, kinds
    st = in_rehearsal(env, *pyhelpers_cmd("run", "status")).stdout
    assert "killed: " in st and "tracker at iteration None" not in st and "unknown" not in st
    assert "slime job      succeeded; Ray is stopped" in st


def test_killed_while_val_plays_beside_compile_resumes_without_replaying(tmp_path, rehearsal_world):
    """Cut 4 (issue 29): bare val plays while compile still waits for the analyst's drain (a slow
    analyst model); the driver is killed there, the resume replays no episode and no compile twice
    and ends with the run finished; the gate always came after compiled.json. One round: round 0's
    val and compile are the same pair as any later round's (the kill matrix above covers round 1)."""
    # The analyst's model answers nothing until the gate file exists: compile waits for its drain
    # until the test has seen val play beside it, however long a loaded machine takes to start the
    # eval server (no request or drain deadline ends the hold first). After the kill, 2 s per
    # request: the resumed drain still outlasts the export.
    gate_file = tmp_path / "analyst-may-answer"
    # (the round-by-round order, ONE_JOB=0: val on the eval server; the one-job mode's val in the job
    # beside compile is killed in tests/test_one_job.py)
    env = rehearse_env(tmp_path, rehearsal_world, ROUNDS=1, ONE_JOB="0", FAKE_ANALYST_HOLD_UNTIL=gate_file,
                       FAKE_ANALYST_DELAY_S="2", ANALYST_TIMEOUT="900", ANALYST_DRAIN_TIMEOUT="900",
                       FAKE_SGLANG_LATENCY_MS="30", **NO_WANDB)
    run = Run(tmp_path / "runs")
    val = run.round_dir(0) / "val" / "episodes.jsonl"

    def val_beside_compile():
        return (val.is_file() and val.read_text().count("\n") >= 1
                and event_seen(run, "stage-start", round=0, stage="compile"))
    proc, log = start(env)
    wait_for("round 0's val to play while compile waits", val_beside_compile, proc=proc, log=log)
    assert not event_seen(run, "stage-end", round=0, stage="compile")  # held: it cannot have ended
    orphans = _kill_and_check(run, proc, min_ckpt=1)
    assert "eval-server" in orphans and not (run.round_dir(0) / "compiled.json").exists()
    played = val.read_text().count("\n")
    gate_file.touch()  # the resumed run's analyst model answers

    res = rehearse(env, "--resume")
    assert res.returncode == 0, res.stdout[-5000:]
    assert_stopped(orphans)
    ids = [json.loads(line)["id"] for line in val.read_text().splitlines()]
    assert len(ids) == len(set(ids)) and len(ids) >= played  # resumed, nothing played twice
    evs = run.events()
    compiled = [i for i, e in enumerate(evs) if e.get("kind") == "stage-end" and e.get("round") == 0
                and e.get("stage") == "compile" and e.get("status") == 0]
    assert len(compiled) == 1, f"round 0 compiled {len(compiled)} times"
    gate = next(i for i, e in enumerate(evs) if e.get("kind") == "episodes" and e.get("what") == "gate"
                and e.get("round") == 0)
    assert compiled[0] < gate
    assert event_seen(run, "stage-end", round=0, stage="inject", status=0)
