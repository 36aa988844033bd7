"""The stand-ins record the modelled seconds they wait (tests/fakes/modelled_wait.py), and the
bench reads a run's timeline in those seconds (bench/modelled_time.py): a wait counts what it
models, the rest (the toolkit's own time) as it was."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import FAKES, ROOT
from fakes import fake_sglang
from fakes.openai_server import FakeOpenAI, slow

sys.path.insert(0, str(ROOT / "bench"))


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def wait_log(tmp_path, monkeypatch):
    log = tmp_path / "waits.jsonl"
    monkeypatch.setenv("FAKE_WAIT_LOG", str(log))
    monkeypatch.setenv("FAKE_WAIT_SCALE", "0.001")  # a real second is a millisecond here
    return log


def test_the_converter_records_its_wait_in_modelled_seconds(wait_log, tmp_path):
    ckpt = tmp_path / "iter_0000003"
    ckpt.mkdir()
    for name in (".metadata", "common.pt"):
        (ckpt / name).write_text("x")
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    env = {"FAKE_CONVERT_DELAY": "0.02", "FAKE_WAIT_LOG": str(wait_log), "FAKE_WAIT_SCALE": "0.001",
           "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, str(FAKES / "slime_stub" / "tools" / "convert_torch_dist_to_hf.py"),
                           "--input-dir", str(ckpt), "--output-dir", str(tmp_path / "out"),
                           "--origin-hf-dir", str(hf)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    [rec] = _records(wait_log)
    assert rec["knob"] == "FAKE_CONVERT_DELAY"
    assert rec["waited_s"] == 0.02 and rec["modelled_s"] == pytest.approx(20.0)
    assert rec["end"] >= rec["start"]


def test_sglang_jit_waits_once_on_a_cold_cache_and_records_it(wait_log, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_SGLANG_JIT_DELAY", "0.01")
    monkeypatch.setenv("FLASHINFER_WORKSPACE_BASE", str(tmp_path / "ws"))
    fake_sglang._jit_on_a_cold_cache()
    fake_sglang._jit_on_a_cold_cache()  # warm now: no wait, no record
    assert [(r["knob"], r["modelled_s"]) for r in _records(wait_log)] == [("FAKE_SGLANG_JIT_DELAY",
                                                                           pytest.approx(10.0))]


def test_the_analyst_model_records_each_slow_answer(wait_log):
    with FakeOpenAI(default=slow(0.01)) as srv:
        req = urllib.request.Request(f"http://127.0.0.1:{srv.port}/v1/chat/completions", method="POST",
                                     data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
                                     .encode(), headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=30).read()
    assert [(r["knob"], r["modelled_s"]) for r in _records(wait_log)] == [("FAKE_ANALYST_DELAY_S",
                                                                           pytest.approx(10.0))]


def test_an_answer_the_client_gave_up_on_records_only_what_it_waited(wait_log):
    # The analyst's drain abandons its request at its deadline and exits: the rest of that
    # answer's delay keeps nothing waiting, so it is not modelled.
    with FakeOpenAI(default=slow(30)) as srv:
        with socket.create_connection(("127.0.0.1", srv.port)) as conn:
            body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
            conn.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            while srv.in_flight == 0:  # the event: the server is inside the slow answer
                time.sleep(0.01)
        while not wait_log.exists():  # written when the server sees the hang-up (or after 30 s without)
            time.sleep(0.01)
        [rec] = _records(wait_log)
    assert rec["knob"] == "FAKE_ANALYST_DELAY_S" and rec["waited_s"] == 30
    assert rec["modelled_s"] < 30_000


def test_a_bad_scale_is_refused_before_the_wait(wait_log, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_WAIT_SCALE", "0")
    monkeypatch.setenv("FLASHINFER_WORKSPACE_BASE", str(tmp_path / "ws"))
    monkeypatch.setenv("FAKE_SGLANG_JIT_DELAY", "3")  # would hang the test if waited first
    with pytest.raises(SystemExit, match="FAKE_WAIT_SCALE='0': not a positive number"):
        fake_sglang._jit_on_a_cold_cache()


def test_a_timeline_in_modelled_seconds():
    import modelled_time

    # 0-1 toolkit (1 s as is), 1-2 a wait modelling 60 s, 2-2.5 toolkit, 2.5-3.5 and 3-4 two
    # overlapping waits modelling 60 s each (stretched over their union once), then toolkit to 5.
    waits = [{"start": 1, "end": 2, "modelled_s": 60}, {"start": 2.5, "end": 3.5, "modelled_s": 60},
             {"start": 3, "end": 4, "modelled_s": 60}]
    to = modelled_time.clock(waits, origin=0)
    assert [to(t) for t in (0, 1, 2, 2.5, 3, 3.5, 4, 5)] == pytest.approx([0, 1, 61, 61.5, 91.5, 121.5, 151.5, 152.5])
    evs = [{"kind": "a", "t": 2.0}, {"kind": "b", "t": 4.5, "since": 3.0}, {"kind": "episodes", "t": 3.0, "seconds": 2.0}]
    assert modelled_time.events(evs, to) == [{"kind": "a", "t": 61.0}, {"kind": "b", "t": 152.0, "since": 91.5},
                                             {"kind": "episodes", "t": 91.5, "seconds": 90.5}]


def test_a_wait_counts_only_inside_its_windows():
    import modelled_time

    waits = [{"knob": "A", "start": 0, "end": 4, "modelled_s": 240}, {"knob": "B", "start": 0, "end": 1, "modelled_s": 5}]
    assert modelled_time.within(waits, "A", [(1, 2), (3, 10)]) == [
        {"knob": "A", "start": 1, "end": 2, "modelled_s": 60}, {"knob": "A", "start": 3, "end": 4, "modelled_s": 60},
        {"knob": "B", "start": 0, "end": 1, "modelled_s": 5}]


def test_a_failed_attempt_the_run_healed_from_lasts_nothing():
    import modelled_time

    evs = [{"kind": "stage-start", "stage": "train", "round": 0, "t": 10.0},
           {"kind": "service-start", "round": 0, "t": 11.0},
           {"kind": "stage-end", "stage": "train", "round": 0, "status": 1, "t": 70.0},
           {"kind": "run-restart", "stage": "train", "round": 0, "t": 70.0},
           {"kind": "stage-start", "stage": "train", "round": 0, "t": 100.0},
           {"kind": "stage-end", "stage": "train", "round": 0, "status": 0, "t": 130.0}]
    dropped = modelled_time.restarts(evs)
    assert dropped == ((10.0, 100.0),)
    to = modelled_time.clock([{"start": 50, "end": 120, "modelled_s": 700}], origin=0, dropped=dropped)
    assert [to(t) for t in (10, 100, 120, 130)] == pytest.approx([10, 10, 210, 220])
    assert [e["t"] for e in modelled_time.without(evs, dropped)] == [100.0, 130.0]
