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
    assert eta.untimed == ["export", "evaluate"]
    assert eta.words() == "ETA round 0:20, run 1:40 (+ export, evaluate: not timed yet)"


def test_later_rounds_use_the_earlier_rounds_stage_times():
    evs = _steps(10, 10, 12, 8) + _stage("train", 50) + _stage("export", 5) + _stage("evaluate", 30) \
        + _stage("evaluate", 3, status=1)  # a failed run of a stage does not count
    eta = estimate(evs, ROUND, rounds=3, steps=4, r=1, stage="train", steps_done=1)
    assert step_seconds(evs) == 10
    assert eta.untimed == [] and eta.round_s == 3 * 10 + 5 + 30 and eta.run_s == eta.round_s + (50 + 5 + 30)


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
