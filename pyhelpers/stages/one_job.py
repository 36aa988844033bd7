"""The one-job mode's job across stages (ONE_JOB=1, docs/one-job-mode.md). Not a stage: the train
stage submits the job once and watches it on in each later round, the evaluate stage waits for the
job's own evaluation of the round (the plugin's eval hook, rollout/in_job_eval.py) -- or, when the
job is gone, plays the round today's way on the eval server.

A round in one job: train (the stage returns once the round's checkpoint is saved; the job goes on
to its weight sync and eval hook, train.py:71-91), rotate, export (the CPU converter, while the
hook plays val), compile (the hook waits for its compiled.json, then plays the gate), evaluate
(waits for the hook's val and gate summaries), inject (the next round's bank, which the job's
next rollout waits for: rollout/bank_wait.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from pyhelpers.config.load import Config
from pyhelpers.evaluate.progress import latest_line
from pyhelpers.launch import ray_lost, rayjob, secret_env, services
from pyhelpers.run import events
from pyhelpers.run.layout import RunLayout

POLL_S = 1.0  # the job's state and the round's summaries are another process's: polled


class _HookProgress:
    """The eval hook's progress (it plays in slime's RolloutManager, whose output goes to slime's
    log): each new line it left in the round's val-progress.txt, then gate-progress.txt, echoed as
    the evaluate stage echoes its own episodes' progress. Called with each poll; never ends the
    wait (returns False)."""

    def __init__(self, paths: list[Path], echo: Callable[[str], None]):
        # a resumed run's old lines: not news while the hook plays
        self.echo, self.last = echo, {path: latest_line(path) for path in paths}
        self.echoed: dict[Path, str] = {}

    def __call__(self) -> bool:
        for path, last in self.last.items():
            line = latest_line(path)
            if line and line != last:
                self.last[path] = self.echoed[path] = line
                self.echo(line)
        return False

    def final(self) -> None:
        """Once the round's summaries exist: each play's last line (written before its summary), unless
        echoed already -- also where the hook ended its play before this driver began to watch (the
        last round's job ends with its hook; a driver slow to reach evaluate finds val done)."""
        for path in self.last:
            line = latest_line(path)
            if line and line != self.echoed.get(path):
                self.echoed[path] = line
                self.echo(line)


def running_job(cfg: Config, lay: RunLayout) -> dict | None:
    """The one-job mode's recorded job (slime-job.json's record) when it still runs, else None."""
    job = rayjob.recorded_job(lay.run_dir)
    if not cfg.ONE_JOB or not job or not job.get("one_job"):
        return None
    try:
        status = rayjob.JobApi(job["dashboard_port"], lay.run_dir, timeout=5.0).info(job["submission_id"]).get("status")
    except Exception:  # noqa: BLE001 - no answer: not a job to watch on (the train stage starts Ray and a job)
        return None
    return job if status not in rayjob.TERMINAL else None


def evaluated_in_job(cfg: Config, lay: RunLayout, r: int, evaluated: Callable[[], bool],
                     echo: Callable[[str], None]) -> bool:
    """Wait while the job runs until `evaluated()` (round r's val and gate summaries, written by the
    job's eval hook). False when no job runs or it ended first: the evaluate stage then plays what
    is missing on the eval server, resuming the hook's episodes."""
    shown = _HookProgress([lay.round(r).val_progress, lay.round(r).gate_progress], echo)
    job = running_job(cfg, lay)
    if job is None:
        if evaluated():
            shown.final()
            return True
        return False
    job_id = job["submission_id"]
    echo(f"round {r}: val and the gate play inside slime job {job_id} (its eval hook); waiting for their summaries")
    api = rayjob.JobApi(job["dashboard_port"], lay.run_dir, timeout=5.0)
    # the hook's episodes need a simulator that died started again, as the eval server's do
    with services.shopsim_watched(cfg, lay, r, on_give_up=echo, progress=echo):
        # the train stage's watch: a head whose Ray is lost meanwhile is ray-lost (the restart stops
        # what is left; the resume plays the round's rest on the eval server), not an error of ours
        outcome = rayjob.watch(job_id, info=api.info, stop=api.stop, started=lambda: True, start_timeout=math.inf,
                               unreachable_timeout=cfg.RAY_UNREACHABLE_TIMEOUT,
                               head_lost=lambda: ray_lost.why_lost(cfg, lay), poll=POLL_S,
                               until=lambda: shown() or evaluated())
    if evaluated():
        shown.final()
    if outcome.status != rayjob.ROUND_SAVED:  # it ended before its hook wrote both summaries
        ended(cfg, lay, r, job_id, {"status": outcome.status, "driver_exit_code": outcome.exit_code})
        return evaluated()
    if r == cfg.ROUNDS - 1:  # the job's last act: it ends once its hook returns
        try:
            info = rayjob.wait_terminal(api, job_id, cfg.STOP_GRACE + 60.0, poll=POLL_S / 4)
        except Exception:  # noqa: BLE001 - the round is evaluated: what is left of the job and its Ray
            info = None    # is the run's end's cleanup, or the next start's
        if info is not None:
            ended(cfg, lay, r, job_id, info)
    return True


def ended(cfg: Config, lay: RunLayout, r: int, job_id: str, info: dict) -> None:
    """The job ended while the driver watched it outside the train stage: its end in the events (as
    the train stage records it), its log copier and key file gone."""
    events.append(lay.run_dir, "job-end", round=r, job_id=job_id, status=info.get("status"),
                  exit_code=info.get("driver_exit_code"))
    services.stop(cfg, lay, "slime-log")
    secret_env.remove_job_netrc(lay.run_dir)
