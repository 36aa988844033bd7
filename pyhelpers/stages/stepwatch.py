"""While a round's slime job trains: one line per training step, with the ETA.

The rollout plugin appends a line to the round's rollout_metrics.jsonl at the end of each step
(rollout/metrics.py; no clock in it). A thread of the train stage reads the file every POLL
seconds; for each step it has not seen it appends a `step-done` event (the step's wall time, as
seen from here: from the job's first-step marker or the previous step) and prints

    round 0 (1 of 2) train: step 1/2 done: 16 episodes, groups kept 4 of 6, success 43.8%, step 5.1 s; ETA ...

On a terminal an updating line ticks between steps. A step slime replays after a resume has a
rollout id already in the file: it is not counted twice.

The metrics line comes when a step's rollout ends; its training follows. slime's own log says when
that is over (launch/slime_log.py): each such line of this job becomes a `train-done` event, so the
last step's training counts as GPU work, not as the wait for the checkpoint (run/gpu_time.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pyhelpers.config.load import Config
from pyhelpers.launch import slime_log
from pyhelpers.rollout.metrics import read_jsonl
from pyhelpers.run import events
from pyhelpers.run.layout import RunLayout
from pyhelpers.stages import progress
from pyhelpers.stages.progress import Eta, step_words

POLL = 0.5
SLIME_LOG = "slime-log.log"  # the slime job's output (train.py copies Ray's driver log there)


def head(r: int, rounds: int, stage: str) -> str:
    return f"round {r} ({r + 1} of {rounds}) {stage}"


def watch(cfg: Config, lay: RunLayout, r: int, stopped: Callable[[float], bool], say: Callable[[str], None],
          eta_at: Callable[[list[dict], int], Eta], status: Callable[[str], None] = lambda s: None) -> None:
    """`eta_at(events, steps_done)`: round r's ETA in train (the driver's, from the registry)."""
    rounds, steps = cfg.ROUNDS, lay.steps_per_round
    path, marker = lay.rollout_metrics(r), lay.started_marker(r)
    seen = set(read_jsonl(path))
    since: float | None = None  # when the step in progress began
    job_log = slime_log.Tail(lay.logs / SLIME_LOG, from_end=True)  # this job's lines follow the last job's
    mine = range(r * steps, (r + 1) * steps)

    def trained() -> None:
        now = time.time()
        for rid, logged in slime_log.trained(job_log.new_text()):
            if rid in mine:  # noticed now, or read late (the job's last lines): its own time bounds it
                events.append(lay.run_dir, "train-done", round=r, rollout_id=rid, since=round(min(now, logged), 3))

    def read_steps() -> float:
        """A step-done event and line for each step the file holds that was not seen; the time now."""
        nonlocal since
        now = time.time()
        if since is None and marker.exists():
            since = marker.stat().st_mtime
            # the GPUs' start of real work this job (pyhelpers/run/gpu_time.py): the marker's time
            events.append(lay.run_dir, "rollout-started", round=r, since=round(since, 3))
        recs = read_jsonl(path)
        new = sorted(k for k in recs if k not in seen)
        for rid in new:
            seen.add(rid)
            secs = (now - since) / len(new) if since is not None else None
            k = rid - r * steps + 1
            m = recs[rid].get("metrics") or {}
            events.append(lay.run_dir, "step-done", round=r, rollout_id=rid, step=k,
                          seconds=round(secs, 3) if secs else None, figures=step_words(m))
            eta = eta_at(events.read(lay.run_dir), k)
            timed = f", step {progress.duration(secs)}" if secs else ""
            say(f"{head(r, rounds, 'train')}: step {k}/{steps} done: {step_words(m)}{timed}; {eta.words()}")
        if new:
            since = now
        return now

    while not stopped(POLL):
        trained()
        now = read_steps()
        if since is not None and len(seen) < steps:
            done = sum(1 for k in seen if r * steps <= k < (r + 1) * steps)
            eta = eta_at(events.read(lay.run_dir), done)
            # The ETA before the step's own clock: a terminal cuts the line at its width (80 columns
            # cut "...(a step takes ~0:03); ETA round ..." before the ETA).
            status(f"{head(r, rounds, 'train')}: step {done + 1}/{steps}; {eta.words()}; "
                   f"this step {progress.duration(now - since)}"
                   + (f" of ~{progress.duration(eta.step_s)}" if eta.step_s else ""))
    # The job has ended, or (ONE_JOB=1) saved this round's checkpoint and goes on: its last step's
    # line is in the file (written before the step trains, so before the save), and slime's last
    # training line in the log (the copier stops after this thread).
    read_steps()
    trained()
    status("")
