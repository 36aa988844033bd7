"""The GPU-busy / GPU-idle split of a round (pyhelpers/run/gpu_time.py) on hand-written event lists."""

from __future__ import annotations

import pytest

from pyhelpers import stages
from pyhelpers.run import gpu_time

ROLES = stages.GPU_ROLES


def ev(t, kind, r=0, **f):
    return {"t": float(t), "kind": kind, "round": r, **f}


def stage(t0, t1, name, r=0, status=0):
    return [ev(t0, "stage-start", r, stage=name), ev(t1, "stage-end", r, stage=name, status=status)]


def one_round(r=0, t=0.0):
    """A round in today's order: train 0-100 (job submitted at 2, first rollout at 20, steps end at
    80, checkpoint saved at 88), rotate 100-101, export 101-131, compile 131-141, evaluate 141-201
    (server 142-172, val 173-183, gate 184-194), inject 201-202."""
    return [
        ev(t + 0, "stage-start", r, stage="train"),
        ev(t + 2, "job-submitted", r),
        ev(t + 20.5, "rollout-started", r, since=t + 20),
        ev(t + 50, "step-done", r, step=1, seconds=30),
        ev(t + 80, "step-done", r, step=2, seconds=30),
        ev(t + 95, "job-end", r, status="SUCCEEDED"),
        ev(t + 95.1, "checkpoint-saved", r, since=t + 88),
        ev(t + 100, "stage-end", r, stage="train", status=0),
        *stage(t + 100, t + 101, "rotate", r),
        ev(t + 101, "stage-start", r, stage="export"),
        ev(t + 101.1, "convert-start", r),
        ev(t + 130.9, "convert-end", r, status=0),
        ev(t + 131, "stage-end", r, stage="export", status=0),
        *stage(t + 131, t + 141, "compile", r),
        ev(t + 141, "stage-start", r, stage="evaluate"),
        {"t": t + 142, "kind": "service-start", "service": "eval-server", "round": r},
        {"t": t + 172, "kind": "service-ready", "service": "eval-server", "round": r, "seconds": 30},
        ev(t + 183, "episodes", r, what="val", seconds=10),
        ev(t + 194, "episodes", r, what="gate", seconds=10),
        ev(t + 201, "stage-end", r, stage="evaluate", status=0),
        *stage(t + 201, t + 202, "inject", r),
    ]


def test_a_round_in_todays_order_splits_into_every_phase():
    (rt,) = gpu_time.split(one_round(), ROLES)
    assert rt.finished and rt.wall_s == pytest.approx(202)
    s = rt.seconds
    assert s["job-start"] == pytest.approx(20)
    assert s["train-steps"] == pytest.approx(60)
    assert s["checkpoint"] == pytest.approx(8)
    assert s["teardown"] == pytest.approx(12 + 1)  # 88 -> 100, and rotate
    assert s["hf-export"] == pytest.approx(30)
    assert s["compile-wait"] == pytest.approx(10)
    assert s["server-start"] == pytest.approx(30)
    assert s["episodes"] == pytest.approx(20)
    assert s["server-stop"] == pytest.approx(7)  # the gate's end (194) -> the stage's end (201)
    assert s["other"] == pytest.approx(1 + 1 + 1 + 1)  # 141-142, 172-173, 183-184, inject
    assert s["restart"] == 0
    assert sum(s.values()) == pytest.approx(rt.wall_s)
    assert rt.busy_s == pytest.approx(80) and rt.idle_frac == pytest.approx(122 / 202)


def test_the_last_steps_training_is_gpu_work_not_the_wait_for_the_checkpoint():
    # slime logs each rollout's training end (train_metric_utils.py `perf <id>:`) after the
    # plugin's metrics line: the last step trains 80 -> 86, then the save ends at 88.
    evs = one_round()
    at = next(i for i, e in enumerate(evs) if e["kind"] == "job-end")
    evs[at:at] = [ev(85.5, "train-done", rollout_id=0, since=56), ev(86.2, "train-done", rollout_id=1, since=86)]
    (rt,) = gpu_time.split(evs, ROLES)
    assert rt.seconds["train-steps"] == pytest.approx(66)
    assert rt.seconds["checkpoint"] == pytest.approx(2)
    assert sum(rt.seconds.values()) == pytest.approx(rt.wall_s)


def test_rounds_tile_the_run_and_each_adds_up_to_its_wall_time():
    evs = one_round(0, 0.0) + one_round(1, 202.5)
    r0, r1 = gpu_time.split(evs, ROLES)
    assert r0.end == r1.start == pytest.approx(202.5)  # the 0.5 s between rounds is round 0's
    for rt in (r0, r1):
        assert sum(rt.seconds.values()) == pytest.approx(rt.wall_s)
    assert gpu_time.run_idle_frac([r0, r1]) == pytest.approx((r0.idle_s + r1.idle_s) / (r0.wall_s + r1.wall_s))


def test_a_round_killed_during_training_and_resumed_bills_the_gap_as_restart():
    evs = [
        ev(0, "stage-start", stage="train"),
        ev(2, "job-submitted"),
        ev(10.2, "rollout-started", since=10),
        ev(40, "step-done", step=1, seconds=30),  # killed at ~45: nothing written after this step
        ev(300, "driver-lost", stage="train", cause="killed"),  # the next driver, 260 s later
        ev(301, "stage-start", stage="train"),
        ev(303, "job-submitted"),
        ev(320.3, "rollout-started", since=320),
        ev(350, "step-done", step=1, seconds=30),  # replayed from the checkpoint
        ev(380, "step-done", step=2, seconds=30),
        ev(391, "checkpoint-saved", since=386),
        ev(390 + 5, "stage-end", stage="train", status=0),
        *stage(395, 396, "inject"),
    ]
    (rt,) = gpu_time.split(evs, ROLES)
    s = rt.seconds
    assert s["job-start"] == pytest.approx(10 + 19)
    assert s["train-steps"] == pytest.approx(30 + 60)
    assert s["restart"] == pytest.approx(301 - 40)  # from the last sign of life to the next stage
    assert s["checkpoint"] == pytest.approx(6) and s["teardown"] == pytest.approx(395 - 386)
    assert sum(s.values()) == pytest.approx(rt.wall_s) == pytest.approx(396)


def test_a_failed_stage_then_a_restart_is_restart_time_until_the_next_stage():
    evs = [*stage(0, 10, "export", status=1), ev(10.1, "run-restart", stage="export", wait_s=20),
           *stage(30, 50, "export"), *stage(50, 51, "inject")]
    (rt,) = gpu_time.split(evs, ROLES)
    assert rt.seconds["hf-export"] == pytest.approx(30) and rt.seconds["restart"] == pytest.approx(20)


def test_val_beside_compile_counts_the_overlap_once_as_the_gpus_saw_it():
    """Cut 4: compile runs beside evaluate; only the gate's wait for it is compile-wait."""
    evs = [
        ev(0, "stage-start", stage="compile"), ev(0.1, "stage-start", stage="evaluate"),
        {"t": 1, "kind": "service-start", "service": "eval-server", "round": 0},
        {"t": 31, "kind": "service-ready", "service": "eval-server", "round": 0},
        ev(41, "episodes", what="val", seconds=10),
        ev(50, "stage-end", stage="compile", status=0),
        ev(60, "episodes", what="gate", seconds=10),
        ev(62, "stage-end", stage="evaluate", status=0),
        *stage(62, 63, "inject"),
    ]
    (rt,) = gpu_time.split(evs, ROLES)
    s = rt.seconds
    assert s["server-start"] == pytest.approx(30) and s["episodes"] == pytest.approx(20)
    assert s["compile-wait"] == pytest.approx(1 + 9)  # before the server starts, and val end -> compiled
    assert s["server-stop"] == pytest.approx(2)
    assert sum(s.values()) == pytest.approx(rt.wall_s)


def test_phase_now_while_a_round_runs():
    evs = one_round()[:3]  # job submitted, first rollout at 20
    assert gpu_time.phase_now(evs[:2], ROLES, now=10) == (0, "job-start")
    assert gpu_time.phase_now(evs, ROLES, now=30) == (0, "train-steps")
    evs = one_round()[:19]  # evaluate: the server started at 142, ready at 172
    assert gpu_time.phase_now(evs[:18], ROLES, now=150) == (0, "server-start")
    assert gpu_time.phase_now(evs, ROLES, now=175) == (0, "episodes")
    assert gpu_time.phase_now([], ROLES, now=1) is None
    rows = gpu_time.split(evs, ROLES, now=175)
    assert not rows[0].finished and rows[0].wall_s == pytest.approx(175)


def test_make_status_names_the_gpus_phase_now():
    from pyhelpers.overview import status

    evs = one_round()[:3]
    busy = status.gpu_line(status.gpu_now(evs, now=30, running=True))
    assert busy == "GPUs: busy (train-steps); round 0 so far: idle 20 s of 30 s (67%)"
    idle = status.gpu_line(status.gpu_now(one_round()[:18], now=150, running=True))
    assert idle.startswith("GPUs: IDLE (server-start); round 0 so far: idle ")
    assert status.gpu_line(status.gpu_now(evs, now=30, running=False)) == "GPUs: idle (no driver runs the job)"
