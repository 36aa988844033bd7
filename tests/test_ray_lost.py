"""The head's Ray dying (its GCS, raylet or dashboard killed, e.g. by the OOM killer) is `ray-lost`:
transient, whenever it happens -- before the job trains, between rounds, while it trains -- never a
hang, a `bug` or `unknown` (issue 41 item 1). The run's part (restart, resume, the same result) is
tests/test_fault_matrix.py's rehearsals; here each way the loss reaches the driver, in one process."""

from __future__ import annotations

import pytest
from support.port_claims import claim_block, claim_port

from pyhelpers.config.load import load
from pyhelpers.errors import ToolkitError
from pyhelpers.launch import rayjob, services
from pyhelpers.loop.supervisor import TRANSIENT, classify, classify_exception
from pyhelpers.procs import groups
from pyhelpers.run.layout import from_config


class SimClock:
    """Simulated time for rayjob.watch: each poll's sleep moves it on; a watch still polling after
    `limit` simulated seconds fails the test instead of hanging it."""

    def __init__(self, limit: float):
        self.t, self.limit = 0.0, limit

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s
        if self.t > self.limit:
            raise AssertionError(f"the watch still polls after {self.limit:g} s of an unreachable job API")


def _unreachable(answers_first: int = 0):
    """A job API that answers RUNNING `answers_first` times, then refuses every connection."""
    import requests

    calls = []

    def info(job_id: str) -> dict:
        calls.append(job_id)
        if len(calls) <= answers_first:
            return {"status": "RUNNING"}
        raise requests.ConnectionError("('Connection aborted.', ConnectionRefusedError(111, 'Connection refused'))")
    return info


def _ray_lost(exc: BaseException, step: int | None = None):
    f = classify_exception("train", 1, step=step, exc=exc)
    assert (f.cause, f.kind) == ("ray-lost", TRANSIENT), f
    return f


def test_a_job_api_unreachable_once_training_started_is_ray_lost_after_ray_unreachable_timeout():
    """During training: the job's dashboard gone with the head's Ray. Before: `job …: UNKNOWN`, then
    polled forever with idle GPUs."""
    clock, stopped = SimClock(limit=3600), []
    with pytest.raises(ToolkitError) as err:
        rayjob.watch("job-1", info=_unreachable(answers_first=1), stop=stopped.append, started=lambda: True,
                     start_timeout=180, unreachable_timeout=60, clock=clock.now, sleep=clock.sleep)
    _ray_lost(err.value, step=3)
    assert "did not answer for 60 s (RAY_UNREACHABLE_TIMEOUT=60)" in err.value.what, err.value.what
    assert 60 <= clock.t < 61 and stopped == []


def test_an_unreachable_job_api_is_ray_lost_at_once_when_the_heads_ray_is_known_dead():
    clock = SimClock(limit=3600)
    with pytest.raises(ToolkitError) as err:
        rayjob.watch("job-1", info=_unreachable(answers_first=1), stop=lambda j: None, started=lambda: True,
                     start_timeout=180, unreachable_timeout=60, clock=clock.now, sleep=clock.sleep,
                     head_lost=lambda: "its `ray start --block` (pid 7) ended")
    _ray_lost(err.value)
    assert "its `ray start --block` (pid 7) ended" in err.value.what and clock.t < 1


def test_a_job_api_that_answers_again_within_the_bound_is_only_a_hiccup():
    clock = SimClock(limit=3600)
    answers = iter([{"status": "RUNNING"}, None, None, {"status": "RUNNING"}, None, None,
                    {"status": "SUCCEEDED", "driver_exit_code": 0}])

    def info(job_id):
        got = next(answers)
        if got is None:
            clock.t += 25  # a request that times out: twice in a row is 50 s, under the bound
            raise ConnectionError("a dashboard hiccup")
        return got
    out = rayjob.watch("job-1", info=info, stop=lambda j: None, started=lambda: True, start_timeout=180,
                       unreachable_timeout=60, clock=clock.now, sleep=clock.sleep)
    assert out.ok and clock.t > 60  # unreachable for longer than the bound in all, never in a row


def test_a_head_dead_before_training_is_ray_lost_not_a_placement_timeout_or_a_bug(tmp_path):
    """Before training: the job never starts and its API is gone. Before: UNKNOWN for the whole
    JOB_START_TIMEOUT, then `api.stop` raised ConnectionError, classified `bug`, the run stopped."""
    clock = SimClock(limit=3600)
    with pytest.raises(ToolkitError) as err:
        rayjob.watch("job-1", info=_unreachable(), stop=_dead_head_api(tmp_path).stop, started=lambda: False,
                     start_timeout=180, unreachable_timeout=60, clock=clock.now, sleep=clock.sleep)
    _ray_lost(err.value)
    # the start deadline comes first: stopping the job on a dead head is ray-lost too
    with pytest.raises(ToolkitError) as err:
        rayjob.watch("job-1", info=_unreachable(), stop=_dead_head_api(tmp_path).stop, started=lambda: False,
                     start_timeout=30, unreachable_timeout=60, clock=clock.now, sleep=clock.sleep)
    _ray_lost(err.value)


def _dead_head_api(tmp_path) -> rayjob.JobApi:
    """The job API of a head whose Ray is gone: nothing listens on its dashboard port."""
    (tmp_path / "ray").mkdir(exist_ok=True)
    (tmp_path / "ray" / "auth-token").write_text("t0ken")
    return rayjob.JobApi(claim_port(), tmp_path, timeout=2.0)


def test_stopping_a_job_on_a_dead_head_is_ray_lost_not_a_connection_error(tmp_path):
    with pytest.raises(ToolkitError) as err:
        _dead_head_api(tmp_path).stop("job-1")
    _ray_lost(err.value)
    assert "job-1" in err.value.what


@pytest.mark.parametrize("what", [
    # between rounds, on a head of several nodes: the versions published into a GCS that is gone
    "Ray refused `kv-put`: Timed out while waiting for GCS to become available.",
    "Ray refused `nodes`: Failed to connect to GCS at address 198.51.100.1:6380 within 5 seconds.",
    "Ray did not answer `nodes` within 180 s",  # a GCS that hangs (launch/cluster.py probe)
    # a head restarted under a job the driver watched
    "Ray knows no job rehearsal-r001-1700000000",
])
def test_ray_s_words_for_a_lost_gcs_are_ray_lost(what):
    f = classify("train", 1, None, what)
    assert (f.cause, f.kind) == ("ray-lost", TRANSIENT), f


@pytest.mark.heavy  # a process recorded as the ray-head service
def test_a_ray_head_whose_gcs_is_gone_is_not_already_up(tmp_path, toolkit_env, monkeypatch):
    """Between rounds: the ray-head service's group is alive (what `ray start` left) but no GCS
    answers. Before: `ray-head: already up`, then the next call to Ray timed out (`unknown`)."""
    monkeypatch.setenv("RAY_PORT", str(claim_block(10)))
    monkeypatch.setenv("RAY_DASHBOARD_PORT", str(claim_port()))
    cfg = load()
    lay = from_config(cfg)
    groups.start("ray-head", ["sleep", "600"], pids_dir=lay.pids, logs_dir=lay.logs)
    try:
        with pytest.raises(ToolkitError) as err:
            services.ensure(cfg, lay, "ray-head")
        _ray_lost(err.value)
        assert f"127.0.0.1:{cfg.RAY_PORT}" in err.value.what, err.value.what
    finally:
        groups.stop_all(lay.pids, 2.0)


def test_a_raylet_still_naming_the_heads_gcs_is_found_and_its_end_seen():
    """The fault matrix's two-node rehearsal, its head's gcs_server killed: the restart's `ray start
    --head` refused ("Ray is trying to start at 198.51.100.1:…, but is already running at …") while
    the worker's raylet, in the other namespace of the same host, still named the dead GCS; the
    refusal was classified `node` and cost a second restart at the same step. The start now waits
    for such a raylet to end (services._no_raylet_naming_the_gcs); here what it looks for."""
    import subprocess
    import sys

    from pyhelpers.launch import ray_lost

    gcs = f"198.51.100.1:{claim_port()}"
    proc = subprocess.Popen(["/opt/ray/core/src/ray/raylet/raylet", "-c", "import time; time.sleep(600)",
                             f"--gcs-address={gcs}"], executable=sys.executable)
    try:
        while proc.pid not in ray_lost.raylets_naming(gcs):
            assert proc.poll() is None
        assert ray_lost.raylets_naming(f"198.51.100.1:{claim_port()}") == []  # another head's: not ours
    finally:
        proc.kill()
        proc.wait()
    assert ray_lost.raylets_naming(gcs) == []
