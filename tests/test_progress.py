"""ETAs from the run's events (pyhelpers/stages/progress.py): steps and stages timed so far."""

from __future__ import annotations

from pyhelpers.stages import ROUND
from pyhelpers.stages.progress import duration, estimate, step_seconds


def _steps(*secs):
    return [{"kind": "step-done", "t": 100.0 + i, "seconds": s} for i, s in enumerate(secs)]


def _stage(stage, seconds, status=0, r=0):
    return [{"kind": "stage-start", "t": 0.0, "round": r, "stage": stage},
            {"kind": "stage-end", "t": seconds, "round": r, "stage": stage, "status": status, "seconds": seconds}]


def test_nothing_timed_yet_says_so():
    eta = estimate([], ROUND, rounds=3, steps=4, r=0, stage="train", steps_done=0)
    assert eta.round_s is None and eta.run_s is None and eta.words() == "ETA unknown until a step is timed"


def test_round_zero_counts_steps_and_names_what_is_not_timed():
    eta = estimate(_steps(10, 10), ROUND, rounds=3, steps=4, r=0, stage="train", steps_done=2)
    assert eta.round_s == 20 and eta.run_s == 20 + 2 * 40
    # after the last step: its training, the checkpoint; after the last round: W&B, the report
    assert eta.untimed == ["checkpoint", "export", "evaluate", "W&B", "report"]
    assert eta.words() == "ETA round 0:20, run 1:40 (+ checkpoint, export, evaluate, W&B, report: not timed yet)"
    assert "W&B" not in estimate(_steps(10), ROUND, rounds=1, steps=1, r=0, stage="train", steps_done=1,
                                 wandb=False).untimed  # WANDB_MODE=disabled: nothing to log


def _round(r: int, t0: float, steps: int, step_s: float, tail_s: float) -> list[dict]:
    """Round r's train stage from t0: `steps` steps of step_s, then tail_s to its end (the last
    step's training, the checkpoint, the job's end); then export 5 s and evaluate 30 s."""
    evs = [{"kind": "stage-start", "t": t0, "round": r, "stage": "train"}]
    evs += [{"kind": "step-done", "t": t0 + (k + 1) * step_s, "round": r, "seconds": step_s} for k in range(steps)]
    end = t0 + steps * step_s + tail_s
    evs.append({"kind": "stage-end", "t": end, "round": r, "stage": "train", "status": 0,
                "seconds": steps * step_s + tail_s})
    for stage, secs in (("export", 5.0), ("evaluate", 30.0)):
        evs += [{"kind": "stage-start", "t": end, "round": r, "stage": stage},
                {"kind": "stage-end", "t": end + secs, "round": r, "stage": stage, "status": 0, "seconds": secs}]
        end += secs
    return evs


def test_the_last_step_counts_what_follows_it_to_the_runs_end():
    """The last step's ETA said "run 0:04" and ~34 s followed: the end of its train stage (its
    training, the checkpoint), export and evaluation, then the run's W&B logging, its report and
    the cleanup. Each is counted from what this run timed of it: earlier rounds' train stages
    after their last step, the rounds' background W&B logging and reports, an earlier cleanup."""
    evs = _round(0, 1000.0, steps=2, step_s=10, tail_s=20)
    evs += [{"kind": "wandb-logged", "t": 1100.0, "seconds": 4.0}, {"kind": "report-written", "t": 1101.0, "seconds": 6.0},
            {"kind": "cleanup", "t": 1102.0, "seconds": 3.0}]
    evs += [{"kind": "stage-start", "t": 1200.0, "round": 1, "stage": "train"},
            {"kind": "step-done", "t": 1210.0, "round": 1, "seconds": 10}, {"kind": "step-done", "t": 1220.0, "round": 1, "seconds": 10}]
    eta = estimate(evs, ROUND, rounds=2, steps=2, r=1, stage="train", steps_done=2)
    assert eta.untimed == []
    assert eta.round_s == 20 + 5 + 30  # the train stage's tail, export, evaluate
    assert eta.run_s == eta.round_s + 4 + 6 + 3  # then W&B, the report, the cleanup
    assert eta.words() == "ETA round 0:55, run 1:08"
    # one round earlier, the run's end comes after the last round, as before
    mid = estimate(evs, ROUND, rounds=3, steps=2, r=1, stage="train", steps_done=2)
    assert mid.run_s == mid.round_s + (20 + 20 + 5 + 30) + 4 + 6 + 3


def test_later_rounds_use_the_earlier_rounds_stage_times():
    evs = _steps(10, 10, 12, 8) + _stage("train", 50) + _stage("export", 5) + _stage("evaluate", 30) \
        + _stage("evaluate", 3, status=1)  # a failed run of a stage does not count
    eta = estimate(evs, ROUND, rounds=3, steps=4, r=1, stage="train", steps_done=1)
    assert step_seconds(evs) == 10
    assert eta.round_s == 3 * 10 + 5 + 30 and eta.run_s == eta.round_s + (50 + 5 + 30)
    assert eta.untimed == ["checkpoint", "W&B", "report"]  # (steps of no round; no end-of-run work timed)


def test_a_stage_in_progress_counts_down_from_its_usual_time():
    evs = _steps(10) + _stage("evaluate", 30) + [{"kind": "stage-start", "t": 1000.0, "round": 1, "stage": "evaluate"}]
    eta = estimate(evs, ROUND, rounds=2, steps=1, r=1, stage="evaluate", steps_done=0, now=1012.0)
    assert eta.round_s == 18 and eta.run_s == 18


def test_durations_read_like_a_clock():
    assert [duration(x) for x in (None, 0, 59.6, 61, 3599, 3600, 90061)] == \
        ["?", "0:00", "1:00", "1:01", "59:59", "1:00:00", "25:01:01"]


def test_a_step_says_what_it_played_and_what_dynamic_sampling_kept():
    from pyhelpers.stages.progress import step_words

    p = "rollout/shopsim/"
    assert step_words({p + "episodes": 16.0, p + "success_rate": 0.4375}) == "16 episodes, success 43.8%"
    assert step_words({p + "episodes": 24.0, p + "groups_drawn": 6.0, p + "groups_kept": 4.0, p + "success_rate": 0.5}) \
        == "24 episodes, groups kept 4 of 6, success 50.0%"


def test_the_in_job_hooks_progress_reaches_the_driver_one_new_line_at_a_time(tmp_path):
    """ONE_JOB=1: the eval hook plays in slime's RolloutManager, whose output goes to slime's log;
    its progress lines reach the driver through the round's val-progress.txt and gate-progress.txt
    (the latest line of each), and the evaluate stage's wait echoes each new one -- not the line a
    killed job left, and not only the gate's where val ended and the gate began between two reads
    (they shared one file: val's last line was lost, once in three suite runs under load)."""
    from pyhelpers.evaluate.progress import LatestLine, Progress
    from pyhelpers.run.layout import RoundFiles
    from pyhelpers.stages.one_job import _HookProgress

    files = RoundFiles(tmp_path / "round-000")
    files.dir.mkdir()
    files.val_progress.write_text("round-000: 3/24 episodes (a killed job's)\n")
    shown: list[str] = []
    relay = _HookProgress([files.val_progress, files.gate_progress], shown.append)
    assert relay() is False and shown == []  # never ends the wait; the old line is not news
    val = Progress("round-000", 2, stream=LatestLine(files.val_progress), every_s=0.0)
    val.add({"termination": "done", "success": True})
    relay()
    relay()
    val.add({"termination": "infra_error", "success": False})
    gate = Progress("gate round-000", 4, stream=LatestLine(files.gate_progress), every_s=0.0)
    gate.add({"termination": "done", "success": True})  # before the driver's next read
    relay()
    assert [line.split(",")[0] for line in shown] == ["round-000: 1/2 episodes", "round-000: 2/2 episodes",
                                                      "gate round-000: 1/4 episodes"], shown
    assert "infra errors 1" in shown[1] and files.val_progress.read_text().count("\n") == 1
    assert not list(files.dir.glob(".*.tmp"))


def test_a_driver_that_reaches_evaluate_after_the_hook_played_still_shows_each_plays_last_line(tmp_path):
    """tests/test_watch.py failed in a fresh clone of 91626bc: round 1's "24/24 episodes" never
    reached the terminal. The last round's job ends with its hook, and a driver slow to reach the
    evaluate stage found val (or all) played: its first read took the finished lines as old news.
    Once the summaries exist, each play's last line is shown, once."""
    from pyhelpers.evaluate.progress import LatestLine, Progress
    from pyhelpers.run.layout import RoundFiles
    from pyhelpers.stages.one_job import _HookProgress

    files = RoundFiles(tmp_path / "round-001")
    files.dir.mkdir()
    val = Progress("round-001", 2, stream=LatestLine(files.val_progress), every_s=0.0)
    for _ in range(2):
        val.add({"termination": "done", "success": True})
    shown: list[str] = []
    relay = _HookProgress([files.val_progress, files.gate_progress], shown.append)
    relay()
    gate = Progress("gate round-001", 1, stream=LatestLine(files.gate_progress), every_s=0.0)
    gate.add({"termination": "done", "success": False})
    relay()
    relay.final()
    relay.final()
    assert [line.split(",")[0] for line in shown] == ["gate round-001: 1/1 episodes", "round-001: 2/2 episodes"], shown
