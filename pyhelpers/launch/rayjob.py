"""The slime job on the run's Ray head, through Ray's job REST API on the loopback dashboard:
submit (POST /api/jobs/, what `ray job submit --submission-id ID --runtime-env-json ...` sends),
watch (GET /api/jobs/<id>), stop (POST /api/jobs/<id>/stop, what `ray job stop ID` sends).

Submitting over HTTP rather than through the `ray` CLI keeps the runtime env off every command
line (nothing in `ps`) and saves the CLI's 1-2 s of imports per round (architecture §10). The
submission id is recorded in runs/<RUN>/slime-job.json, so `make stop` and `make resume` can stop a job
the driver no longer watches.

slime waits forever for a placement group when GPUs are short (slime/ray/placement_group.py logs
"Waiting for placement group" every 30 s and never gives up), so the
watcher applies its own deadline to "started training": the rollout plugin touches a marker file
on its first episode. The job's final status, exit code and message come back to the driver.
A job API that stops answering -- the head's Ray lost with the job on it -- is waited out for at
most RAY_UNREACHABLE_TIMEOUT s (at once when the head is known dead), then raised as ray-lost
(launch/ray_lost.py), before training or after it started alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyhelpers.errors import ToolkitError
from pyhelpers.jsonfiles import load_json_or_none, write_json_atomic
from pyhelpers.launch import ray_auth, ray_lost
from pyhelpers.run.layout import slime_job_record

TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")


@dataclass(frozen=True)
class JobOutcome:
    status: str  # SUCCEEDED | FAILED | STOPPED | START_TIMEOUT | ROUND_SAVED (the job goes on: `until`)
    message: str
    exit_code: int | None

    @property
    def ok(self) -> bool:
        return self.status in ("SUCCEEDED", ROUND_SAVED)


ROUND_SAVED = "ROUND_SAVED"  # watch()'s `until` came true while the job runs on (the one-job mode)


class JobApi:
    """The calls the watcher needs, over HTTP on 127.0.0.1 (requests, lazily imported), with the
    run's Ray token (pyhelpers/launch/ray_auth.py)."""

    def __init__(self, dashboard_port: int, run_dir: Path, timeout: float = 10.0):
        import requests  # local: requests (~60 ms) only when a job is watched, not for `make plan`

        self.base = f"http://127.0.0.1:{dashboard_port}/api/jobs"
        self.timeout = timeout
        self.http = requests.Session()
        self.http.trust_env = False  # loopback: never through an http_proxy of the environment
        self.http.headers.update(ray_auth.headers(run_dir))

    def info(self, job_id: str) -> dict:
        r = self.http.get(f"{self.base}/{job_id}", timeout=self.timeout)
        if r.status_code == 404:
            raise ToolkitError(f"Ray knows no job {job_id}", self.base, "was the Ray head restarted? run `make resume`")
        if r.status_code in (401, 403):
            raise ray_auth.refused(r.status_code, self.base)
        r.raise_for_status()
        return r.json()

    def stop(self, job_id: str) -> None:
        """Ask Ray to stop the job; a head that does not answer is lost (ray-lost), not a bug."""
        import requests  # local: as in __init__

        try:
            self.http.post(f"{self.base}/{job_id}/stop", timeout=self.timeout)
        except requests.RequestException as exc:
            raise ray_lost.error(f"cannot stop job {job_id}: Ray's job API does not answer "
                                 f"({type(exc).__name__})", self.base) from None

    def submit(self, submission_id: str, entrypoint: str, runtime_env: dict, agent_wait: float = 0.0,
               retry_every: float = 2.0, head_up: Callable[[], bool] = lambda: True) -> str:
        """Submit the job. For up to agent_wait s the job API may still be finding its agent: on a
        busy machine the dashboard answers before the head node id and the agent are in GCS, and
        the job API answers 500 "No available agent" (ray 2.60 dashboard/modules/job/
        job_head.py:294-319, 418-426) or drops the connection; that is tried again while head_up()
        (a head whose raylet died never gets an agent). A retry told that the id already exists
        was preceded by a submission that got through."""
        import requests  # local: as in __init__

        body = {"entrypoint": entrypoint, "submission_id": submission_id, "runtime_env": runtime_env}
        deadline, tried = time.monotonic() + agent_wait, False
        while True:
            try:
                r = self.http.post(f"{self.base}/", json=body, timeout=max(self.timeout, 30.0))
            except requests.RequestException as exc:
                r, why = None, f"cannot reach Ray's job API ({exc})"
            if r is not None and r.status_code in (401, 403):
                raise ray_auth.refused(r.status_code, self.base)
            if r is not None and r.status_code < 400:
                return r.json().get("submission_id") or submission_id
            if r is not None and tried and r.status_code == 400 and "already exists" in r.text:
                return submission_id
            if r is not None:
                why = f"Ray refused the job (HTTP {r.status_code}: {r.text[:300]})"
            waiting = r is None or (r.status_code == 500 and "No available agent" in r.text)
            if waiting and not head_up():
                raise ray_lost.error(why, self.base)
            if not waiting or time.monotonic() + retry_every > deadline:
                raise ToolkitError(why, self.base, "is the Ray head up? see logs/ray-head.log; then `make resume`")
            tried = True
            time.sleep(retry_every)


def record_path(run_dir: Path) -> Path:
    return slime_job_record(run_dir)


def record_job(run_dir: Path, *, submission_id: str, round_: int, dashboard_port: int, log: str,
               one_job: bool = False) -> None:
    """one_job: the job trains every round from round_ on (the one-job mode), so a later round's
    train stage watches it on instead of submitting another."""
    write_json_atomic(record_path(run_dir), {"submission_id": submission_id, "round": round_,
                                              "dashboard_port": dashboard_port, "log": log, "one_job": one_job})


def recorded_job(run_dir: Path) -> dict | None:
    return load_json_or_none(record_path(run_dir))


def wait_terminal(api: JobApi, job_id: str, bound_s: float, poll: float) -> dict | None:
    """The job's info once it has ended, asked every `poll` s for up to bound_s; None past that.
    The API's errors are the caller's (a head that no longer answers means different things)."""
    deadline = time.monotonic() + bound_s
    while True:
        info = api.info(job_id)
        if info.get("status") in TERMINAL:
            return info
        if time.monotonic() >= deadline:
            return None
        time.sleep(poll)


def driver_log(ray_temp_dir: str, submission_id: str) -> Path:
    """Where Ray writes the job driver's output (the slime process's stdout/stderr)."""
    return Path(ray_temp_dir) / "session_latest" / "logs" / f"job-driver-{submission_id}.log"


def watch(job_id: str, *, info: Callable[[str], dict], stop: Callable[[str], None], started: Callable[[], bool],
          start_timeout: float, unreachable_timeout: float, head_lost: Callable[[], str | None] = lambda: None,
          poll: float = 0.25, clock=time.monotonic, sleep=time.sleep,
          progress: Callable[[str], None] = lambda s: None,
          until: Callable[[], bool] = lambda: False) -> JobOutcome:
    """Poll until the job ends, or (ROUND_SAVED) until() comes true while it runs; stop it when it
    has not started training within start_timeout. While the job API does not answer, head_lost()
    (what is wrong with the head's Ray, or None) is asked: a lost head, or no answer for
    unreachable_timeout s, raises ray-lost."""
    t0 = clock()
    seen_start = False
    last = None
    unreachable_since = None
    while True:
        try:
            data = info(job_id)
            unreachable_since = None
        except ToolkitError:
            raise
        except Exception as exc:  # noqa: BLE001 - the dashboard may hiccup; a lost head may not
            now = clock()
            unreachable_since = now if unreachable_since is None else unreachable_since
            lost = head_lost()
            if lost or now - unreachable_since >= unreachable_timeout:
                why = lost or (f"Ray's job API did not answer for {now - unreachable_since:.0f} s "
                               f"(RAY_UNREACHABLE_TIMEOUT={unreachable_timeout:g})")
                raise ray_lost.error(f"job {job_id}: {why}; last error: {type(exc).__name__}: {exc}"[:600],
                                     "the job API on the head's dashboard (logs/ray-head.log)") from None
            data = {"status": "UNKNOWN", "message": f"job API unreachable: {exc}"}
        status = data.get("status", "UNKNOWN")
        if status in TERMINAL:
            return JobOutcome(status, data.get("message") or "", data.get("driver_exit_code"))
        if status == "RUNNING" and until():
            return JobOutcome(ROUND_SAVED, "", None)
        if not seen_start and started():
            seen_start = True
            progress(f"job {job_id} started training ({clock() - t0:.0f} s after submission)")
        if status != last:
            progress(f"job {job_id}: {status}" + (" (its job API does not answer; waiting up to "
                                                  f"{unreachable_timeout:g} s, RAY_UNREACHABLE_TIMEOUT)"
                                                  if unreachable_since is not None else ""))
            last = status
        if not seen_start and clock() - t0 > start_timeout:
            stop(job_id)  # raises ray-lost when the head does not answer
            return JobOutcome("START_TIMEOUT", f"the job did not start training within {start_timeout:.0f} s "
                              f"(JOB_START_TIMEOUT); slime waits for a placement group of its GPUs forever, so "
                              f"this usually means fewer GPUs than NUM_GPUS are free", None)
        sleep(poll)


def marker_started(marker: Path) -> Callable[[], bool]:
    return lambda: Path(marker).exists()
