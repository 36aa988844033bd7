"""Pruning the run's Ray temp dir (pyhelpers/launch/ray_sessions.py) on real directories and a
real process: only this run's recorded sessions, never the one session_latest names, never one a
live process still writes to, never another's."""

from __future__ import annotations

import os
import subprocess

from pyhelpers.launch import ray_sessions


def _session(d: int, pid: int) -> str:
    return f"session_2026-01-{d:02d}_10-00-00_000000_{pid}"


def test_prune_keeps_the_newest_recorded_sessions_and_spares_latest_live_and_foreign(tmp_path):
    temp, run = tmp_path / "ray", tmp_path / "run"
    ours = [_session(d, 100 + d) for d in range(1, 8)]
    foreign = _session(5, 999)
    for name in [*ours, foreign]:
        (temp / name / "logs").mkdir(parents=True)
    (run / "ray").mkdir(parents=True)
    (run / "ray" / "sessions").write_text("".join(f"{n}\n" for n in ours))
    os.symlink(temp / ours[0], temp / "session_latest")  # whatever it names stays
    log = temp / ours[1] / "logs" / "worker.out"
    with open(log, "w") as fh:  # an orphan still logging into an old session
        orphan = subprocess.Popen(["sleep", "60"], stdout=fh, start_new_session=True)
    try:
        removed = ray_sessions.prune(run, temp, keep=3)
    finally:
        orphan.kill()
        orphan.wait()
    assert removed == [ours[2], ours[3]]
    assert sorted(p.name for p in temp.iterdir()) == sorted([*ours[:2], *ours[4:], foreign, "session_latest"])
    assert ray_sessions.recorded(run) == [ours[0], ours[1], *ours[4:]]
    assert ray_sessions.prune(run, temp, keep=3) == [ours[1]]  # the orphan is gone now


def test_prune_forgets_sessions_already_gone_and_does_nothing_without_a_record(tmp_path):
    temp, run = tmp_path / "ray", tmp_path / "run"
    (temp / _session(1, 7)).mkdir(parents=True)
    assert ray_sessions.prune(run, temp, keep=0) == []  # not recorded: not ours
    assert (temp / _session(1, 7)).is_dir()
    (run / "ray").mkdir(parents=True)
    (run / "ray" / "sessions").write_text(f"{_session(2, 8)}\n")
    assert ray_sessions.prune(run, temp, keep=0) == [] and ray_sessions.recorded(run) == []


def test_record_takes_only_a_session_of_the_head_s_own_processes(tmp_path):
    temp, run = tmp_path / "ray", tmp_path / "run"
    (temp / _session(1, 4242)).mkdir(parents=True)
    os.symlink(temp / _session(1, 4242), temp / "session_latest")
    assert ray_sessions.record(run, temp, {1, 2}) is None and ray_sessions.recorded(run) == []
    assert ray_sessions.record(run, temp, {4242}) == _session(1, 4242)
    assert ray_sessions.record(run, temp, {4242}) == _session(1, 4242)  # once
    assert ray_sessions.recorded(run) == [_session(1, 4242)]
