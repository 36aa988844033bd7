"""The run's recorded slime job (runs/<RUN>/slime-job.json), stopped: by the train stage when it
fails or gives up, by the loop before a restart, and by `make stop` / cleanup. One place, below
the stages, so none of them reaches into the train stage that submits the job."""

from __future__ import annotations

from pyhelpers.config.load import Config
from pyhelpers.launch import rayjob, services
from pyhelpers.run import events
from pyhelpers.run.layout import RunLayout


def stop(cfg: Config, lay: RunLayout) -> str:
    """Stop the job recorded in slime-job.json and wait up to STOP_GRACE s for it to end."""
    job = rayjob.recorded_job(lay.run_dir)
    grace = cfg.STOP_GRACE
    try:
        if not job:
            return ""
        api, job_id = rayjob.JobApi(job["dashboard_port"], lay.run_dir, timeout=3.0), job["submission_id"]
        try:
            info = api.info(job_id)
            if info.get("status") in rayjob.TERMINAL:
                return f"slime job {job_id}: already ended" + _unsupervised_end(lay, job, info)
            api.stop(job_id)
            if rayjob.wait_terminal(api, job_id, grace, poll=0.2) is not None:
                return f"slime job {job_id}: stopped"
            return f"slime job {job_id}: still stopping after {grace:g} s (stopping the Ray head ends it)"
        except Exception as exc:  # noqa: BLE001 - the head may be gone; stopping the head ends the job anyway
            return f"slime job {job_id}: Ray not reachable ({type(exc).__name__}); stopping the Ray head ends it"
    finally:
        services.stop(cfg, lay, "slime-log")


def _unsupervised_end(lay: RunLayout, job: dict, info: dict) -> str:
    """A job that ended with no driver watching (its driver was killed): record how it ended, once."""
    job_id = job["submission_id"]
    if any(e.get("job_id") == job_id and e.get("kind") in ("job-end", "job-end-unsupervised")
           for e in events.read(lay.run_dir)):
        return ""
    events.append(lay.run_dir, "job-end-unsupervised", round=job.get("round"), job_id=job_id,
                  status=info.get("status"), exit_code=info.get("driver_exit_code"),
                  detail=f"slime job {job_id} {info.get('status')} while no driver watched it")
    return f" ({info.get('status')} while no driver watched it; recorded)"
