"""Watching a slime job that `ray job submit --no-wait` started, through Ray's job REST API on
the loopback dashboard (GET /api/jobs/<id>, POST /api/jobs/<id>/stop).

slime waits forever for a placement group when GPUs are short (slime-interface.md §1.5), so the
watcher applies its own deadline to "started training": the rollout plugin touches a marker file
on its first episode. The job's final status, exit code and message come back to the driver.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .errors import ToolkitError

TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")


@dataclass(frozen=True)
class JobOutcome:
    status: str  # SUCCEEDED | FAILED | STOPPED | START_TIMEOUT
    message: str
    exit_code: int | None

    @property
    def ok(self) -> bool:
        return self.status == "SUCCEEDED"


class JobApi:
    """The two calls the watcher needs, over HTTP on 127.0.0.1 (requests, lazily imported)."""

    def __init__(self, dashboard_port: int, timeout: float = 10.0):
        self.base = f"http://127.0.0.1:{dashboard_port}/api/jobs"
        self.timeout = timeout

    def info(self, job_id: str) -> dict:
        import requests

        r = requests.get(f"{self.base}/{job_id}", timeout=self.timeout)
        if r.status_code == 404:
            raise ToolkitError(f"Ray knows no job {job_id}", self.base, "was the Ray head restarted? run `make resume`")
        r.raise_for_status()
        return r.json()

    def stop(self, job_id: str) -> None:
        import requests

        requests.post(f"{self.base}/{job_id}/stop", timeout=self.timeout)


def watch(job_id: str, info: Callable[[str], dict], stop: Callable[[str], None], started: Callable[[], bool],
          start_timeout: float, poll: float = 2.0, clock=time.monotonic, sleep=time.sleep,
          progress: Callable[[str], None] = lambda s: None) -> JobOutcome:
    """Poll until the job ends; stop it when it has not started training within start_timeout."""
    t0 = clock()
    seen_start = False
    last = None
    while True:
        try:
            data = info(job_id)
        except ToolkitError:
            raise
        except Exception as exc:  # the dashboard may hiccup; the deadline still applies
            data = {"status": "UNKNOWN", "message": f"job API unreachable: {exc}"}
        status = data.get("status", "UNKNOWN")
        if status in TERMINAL:
            return JobOutcome(status, data.get("message") or "", data.get("driver_exit_code"))
        if not seen_start and started():
            seen_start = True
            progress(f"job {job_id} started training ({clock() - t0:.0f} s after submission)")
        if status != last:
            progress(f"job {job_id}: {status}")
            last = status
        if not seen_start and clock() - t0 > start_timeout:
            stop(job_id)
            return JobOutcome("START_TIMEOUT", f"the job did not start training within {start_timeout:.0f} s "
                              f"(JOB_START_TIMEOUT); slime waits for a placement group of its GPUs forever, so "
                              f"this usually means fewer GPUs than NUM_GPUS are free", None)
        sleep(poll)


def marker_started(marker: Path) -> Callable[[], bool]:
    return lambda: Path(marker).exists()
