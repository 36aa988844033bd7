"""`pyhelpers analyst run` as a real process: SIGKILL and restart, TERM, W&B offline, no key leaks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pytest
from conftest import ROOT, run_pyhelpers
from fakes.openai_server import FakeOpenAI, derive, error, slow
from support.analyst import KEY, assert_exactly_once, candidate_files, ledger_events, make_round, spool_record
from support.rehearsal import wait_for

from pyhelpers.analyst.budget import Clock
from pyhelpers.analyst.ledger import RoundLock
from pyhelpers.jsonfiles import write_json_exclusive

RUN = "qwen35-4b-train-100"  # toolkit_env's run name (WANDB_GROUP's default)


@pytest.fixture
def srv():
    with FakeOpenAI(expect_key=KEY) as s:
        yield s


@pytest.fixture
def env(toolkit_env, srv):
    return {**toolkit_env, "DASHSCOPE_API_KEY": KEY, "ANALYST_BASE_URL": srv.base_url, "ANALYST_BATCH_SIZE": "3",
            "ANALYST_POLL_INTERVAL": "0.1", "ANALYST_BACKOFF": "0.01", "ANALYST_BACKOFF_MAX": "0.05",
            "ANALYST_TIMEOUT": "60", "ANALYST_MAX_RPM": "6000", "ANALYST_DRAIN_TIMEOUT": "30"}


def start(rdir, env, log, *extra) -> subprocess.Popen:
    """The sidecar as the driver starts it: its own session (process group), stderr to a log."""
    return subprocess.Popen([sys.executable, "-m", "pyhelpers", "analyst", "run", "--round-dir", str(rdir), *extra],
                            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
                            start_new_session=True)


def ids_of(n):
    return [f"r0-s{k // 2}-g{k % 2}-i0" for k in range(n)]


@pytest.mark.parametrize("concurrency", [1, 3])
def test_sigkill_mid_batch_then_drain_writes_each_record_once(tmp_path, srv, env, concurrency):
    rdir = make_round(tmp_path, 10)
    slow_ones = 1 if concurrency == 1 else 2
    srv.push(derive(), *[slow(120)] * slow_ones)  # batches in flight when the process dies
    with open(tmp_path / "analyst.log", "w") as log:
        proc = start(rdir, {**env, "ANALYST_CONCURRENCY": str(concurrency)}, log)
        try:
            assert srv.wait_for_requests(1 + slow_ones), (tmp_path / "analyst.log").read_text()
            wait_for("the quick batch written", lambda: candidate_files(rdir))
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert len(candidate_files(rdir)) == 1
    events = ledger_events(rdir)
    written = {e["batch_id"] for e in events if e["event"] == "written"}
    in_flight = [e["batch_id"] for e in events if e["event"] == "planned" and e["batch_id"] not in written]
    assert len(in_flight) == slow_ones
    # A record that arrives meanwhile and sorts inside the in-flight batch must not reshuffle it.
    late = spool_record(0, 1, 0, 1)
    write_json_exclusive(rdir / "spool" / f"{late['id']}.json", late)

    r = run_pyhelpers(["analyst", "run", "--round-dir", str(rdir), "--drain"], env)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["left"] == 0 and summary["why"] == "drained" and summary["records_processed"] == 11
    files = assert_exactly_once(rdir, [*ids_of(10), late["id"]])
    assert {f"{b}.json" for b in in_flight} <= set(files)  # re-sent batches rewrote the same file names
    assert sorted(len(d["record_ids"]) for d in files.values()) == [2, 3, 3, 3]  # + the drain's remainder


def test_term_stops_cleanly_without_partial_output(tmp_path, srv, env):
    rdir = make_round(tmp_path, 3)
    srv.push(slow(120))
    with open(tmp_path / "analyst.log", "w") as log:
        proc = start(rdir, env, log)
        assert srv.wait_for_requests(1)
        os.killpg(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert json.loads(out.strip().splitlines()[-1])["why"] == "stopped"
    assert list((rdir / "candidates").iterdir()) == []
    assert "request in flight" not in out  # log lines go to stderr, stdout is the summary only


def test_wandb_offline_counters_and_no_key_anywhere(tmp_path, srv, env):
    rdir = make_round(tmp_path, 6)
    # An error message that echoes the key: it must still not reach a file or a log.
    srv.push(error(400, code="InvalidParameter", message=f"header was Bearer {KEY}"))
    logs = tmp_path / "runs" / RUN / "logs"
    logs.mkdir(parents=True)
    with open(logs / "analyst.log", "w") as log:
        proc = start(rdir, env, log, "--drain", "--wandb")
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, (logs / "analyst.log").read_text()
    assert all(r.headers["Authorization"] == f"Bearer {KEY}" for r in srv.requests)
    docs = sorted(candidate_files(rdir).values(), key=lambda d: d["status"])
    assert [d["status"] for d in docs] == ["ok", "rejected"] and "***" in docs[1]["reason"]

    runs = list((tmp_path / "runs" / RUN / "wandb" / "wandb").glob(f"offline-run-*-{RUN}-analyst-r000"))
    assert len(runs) == 1
    inspect = subprocess.run([str(ROOT / ".venv/bin/wandb"), "leet", "inspect", "--json", str(runs[0])],
                             capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert inspect.returncode == 0, inspect.stderr
    records = [json.loads(line) for line in inspect.stdout.splitlines() if line.startswith("{")]
    history = [r["history"] for r in records if r.get("type") == "history"]
    last = history[-1]["item"]
    assert (last["analyst/proposals"], last["analyst/batches_rejected"], last["analyst/records_processed"]) == (3, 1, 6)
    assert last["analyst/errors/http_400"] == 1 and last["analyst/records_pending"] == 0
    assert len(history) == 2  # one row per change of the totals, none repeated
    run_rec = next(r["run"] for r in records if r.get("type") == "run")
    assert (run_rec["run_group"], run_rec["job_type"]) == (RUN, "analyst")
    assert KEY not in inspect.stdout and KEY not in out

    leaks = [p for p in tmp_path.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert leaks == []  # logs, candidates, ledger, stats, calls, the .wandb file, wandb's own logs


def test_missing_key_and_second_instance(tmp_path, srv, env):
    rdir = make_round(tmp_path, 3)
    r = run_pyhelpers(["analyst", "run", "--round-dir", str(rdir)], {**env, "DASHSCOPE_API_KEY": ""})
    assert r.returncode == 1 and "DASHSCOPE_API_KEY is not set" in r.stderr and "Traceback" not in r.stderr
    r = run_pyhelpers(["analyst", "run", "--round-dir", str(tmp_path / "elsewhere")], env)
    assert r.returncode == 1 and "cannot tell which round" in r.stderr
    lock = RoundLock(rdir / "analyst" / "lock")
    assert lock.acquire(Clock(threading.Event()), wait=False)
    try:
        r = run_pyhelpers(["analyst", "run", "--round-dir", str(rdir)], env)
    finally:
        lock.release()
    assert r.returncode == 5 and "another analyst" in r.stderr and srv.requests == []
