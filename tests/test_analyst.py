"""The Failure Analyst in-process against the fake chat server on loopback (real HTTP, real files)."""

from __future__ import annotations

import dataclasses
import json
import threading

import pytest
from fakes.openai_server import (
    FakeOpenAI,
    derive,
    derived_proposals,
    drop,
    error,
    malformed,
    record_ids_in,
    reply,
    slow,
)
from support.analyst import KEY, add_records, assert_exactly_once, candidate_files, ledger_events, make_round
from support.rehearsal import wait_for

from pyhelpers.analyst import prompt, sidecar
from pyhelpers.analyst.ledger import batch_id
from pyhelpers.analyst.prompt import ReplyError, parse_reply


@pytest.fixture
def srv():
    with FakeOpenAI(expect_key=KEY) as s:
        yield s


def settings(rdir, srv, **over) -> sidecar.Settings:
    # timeout and drain_timeout bound a hang only (a loaded machine answers late); the tests of
    # timeouts and deadlines set their own
    base = dict(round_dir=rdir, round=0, base_url=srv.base_url, model="qwen-plus", batch_size=3, max_rpm=0,
                max_calls=100, timeout=60.0, drain_timeout=300.0, poll_interval=0.05, retries=4, backoff=0.01,
                backoff_max=0.05)
    return sidecar.Settings(**{**base, **over})


def drain(s, key=KEY) -> sidecar.Outcome:
    return sidecar.run(s, key, threading.Event(), drain=True)


def stats(rdir) -> dict:
    return json.loads((rdir / "analyst" / "stats.json").read_text())


def test_watch_then_drain_writes_each_record_once(tmp_path, srv):
    rdir = make_round(tmp_path, 7)
    stop = threading.Event()
    box = {}
    t = threading.Thread(target=lambda: box.update(out=sidecar.run(settings(rdir, srv), KEY, stop, drain=False)))
    t.start()
    # the loop sends full batches only: 2 of 3 records, the 7th waits
    wait_for("the two full batches written", lambda: len(candidate_files(rdir)) == 2)
    stop.set()
    t.join(10)
    assert box["out"].code == sidecar.EXIT_OK and box["out"].why == "stopped" and box["out"].left == 1
    assert len(srv.requests) == 2

    out = drain(settings(rdir, srv))
    assert (out.code, out.why, out.left) == (0, "drained", 0)
    ids = [f"r0-s{k // 2}-g{k % 2}-i0" for k in range(7)]
    files = assert_exactly_once(rdir, ids)
    assert [len(d["record_ids"]) for d in files.values()].count(3) == 2
    for req in srv.requests:  # the key travelled in the header; the prompt is what was hashed
        assert req.headers["Authorization"] == f"Bearer {KEY}"
        doc = files[f"{batch_id(record_ids_in(req.body['messages']))}.json"]
        assert doc["prompt_hash"] == prompt.prompt_hash(req.body["messages"])
        assert doc["status"] == "ok" and doc["reason"] is None
        assert doc["proposals"] == parse_reply(json.dumps(derived_proposals(req.body["messages"])),
                                               doc["record_ids"])[0]
    assert stats(rdir)["records_processed"] == 7 and stats(rdir)["proposals"] == 7
    assert drain(settings(rdir, srv)).code == 0 and len(srv.requests) == 3  # nothing sent twice


def test_429_waits_for_retry_after_then_succeeds(tmp_path, srv):
    rdir = make_round(tmp_path, 3)
    srv.push(error(429, code="Throttling.RateQuota", message="Requests rate limit exceeded", retry_after=1))
    assert drain(settings(rdir, srv)).code == 0
    assert len(srv.requests) == 2
    assert srv.requests[1].t - srv.requests[0].t >= 1.0  # Retry-After is a lower bound on the wait
    assert candidate_files(rdir).popitem()[1]["status"] == "ok"
    assert stats(rdir)["errors"] == {"http_429": 1}


def test_500_drop_malformed_and_timeout_are_retried(tmp_path, srv):
    rdir = make_round(tmp_path, 3)
    srv.push(error(500), drop(), malformed(), slow(5))
    assert drain(settings(rdir, srv, timeout=1.0)).code == 0
    assert len(srv.requests) == 5
    assert candidate_files(rdir).popitem()[1]["status"] == "ok"
    assert stats(rdir)["errors"] == {"http_5xx": 1, "connection": 1, "bad_envelope": 1, "timeout": 1}


def test_outage_leaves_records_pending_for_a_later_run(tmp_path, srv):
    rdir = make_round(tmp_path, 4)
    srv.default = error(503)
    out = drain(settings(rdir, srv, retries=1, drain_timeout=1.0))
    assert (out.code, out.why, out.left) == (sidecar.EXIT_LEFT, "deadline", 4)
    assert candidate_files(rdir) == {}
    srv.default = derive()
    assert drain(settings(rdir, srv)).left == 0
    assert_exactly_once(rdir, [f"r0-s{k // 2}-g{k % 2}-i0" for k in range(4)])


def test_401_stops_calling_and_writes_nothing(tmp_path, srv):
    rdir = make_round(tmp_path, 6)
    out = drain(settings(rdir, srv), key="sk-wrong")
    assert out.code == sidecar.EXIT_FATAL and "401" in out.why and "DASHSCOPE_API_KEY" in out.why
    assert len(srv.requests) == 1 and candidate_files(rdir) == {}
    assert stats(rdir)["errors"] == {"auth": 1} and stats(rdir)["records_pending"] == 6


def test_400_rejects_that_batch_only(tmp_path, srv):
    rdir = make_round(tmp_path, 6)
    srv.push(error(400, code="DataInspectionFailed", message="Input data may contain inappropriate content."))
    assert drain(settings(rdir, srv)).code == 0
    statuses = sorted((d["status"], d["reason"]) for d in candidate_files(rdir).values())
    assert statuses[0] == ("ok", None)
    assert statuses[1][0] == "rejected" and statuses[1][1].startswith("HTTP 400 DataInspectionFailed")
    assert len(srv.requests) == 2


def test_garbage_is_rejected_with_the_reason_after_one_nudge(tmp_path, srv):
    rdir = make_round(tmp_path, 3)
    srv.push(reply("Sure! Here are some skills: be careful."), reply("```json\n{\"proposals\": [\n```"))
    assert drain(settings(rdir, srv)).code == 0
    doc = candidate_files(rdir).popitem()[1]
    assert doc["status"] == "rejected" and doc["proposals"] == []
    assert "not JSON" in doc["reason"] and "after a JSON-only follow-up" in doc["reason"]
    nudge = srv.requests[1].body["messages"]
    assert nudge[-2]["role"] == "assistant" and "ONE JSON object" in nudge[-1]["content"]
    assert doc["prompt_hash"] == prompt.prompt_hash(srv.requests[0].body["messages"])


def test_schema_invalid_reply_then_fixed_by_the_nudge(tmp_path, srv):
    rdir = make_round(tmp_path, 3)
    srv.push(reply('{"proposals": [{"title": "x"}]}'))
    assert drain(settings(rdir, srv)).code == 0
    doc = candidate_files(rdir).popitem()[1]
    assert doc["status"] == "ok" and len(doc["proposals"]) == 3
    assert stats(rdir)["errors"] == {"bad_reply": 1}


def test_parse_reply_rules():
    ids = ["r0-s1-g0-i0"]
    good = {"title": "Check size", "trigger": "a size option", "instruction": "pick it", "kind": "options",
            "polarity": "do", "evidence": ["r0-s1-g0-i0", "r9-s9-g9-i9"]}
    props, dropped = parse_reply("```json\n" + json.dumps({"proposals": [good]}) + "\n```", ids)
    assert props[0]["evidence"] == ids and dropped == 0  # fence unwrapped, unknown evidence removed
    assert parse_reply(json.dumps({"proposals": [{**good, "evidence": ["r9-s9-g9-i9"]}]}), ids) == ([], 1)
    with pytest.raises(ReplyError, match=r"\$\.proposals\[0\]\.kind.*rule: enum"):
        parse_reply(json.dumps({"proposals": [{**good, "kind": "magic"}]}), ids)
    with pytest.raises(ReplyError, match="empty"):
        parse_reply("  ", ids)


def test_spend_cap_is_kept_across_restarts(tmp_path, srv):
    rdir = make_round(tmp_path, 5)
    s = settings(rdir, srv, batch_size=1, max_calls=2)
    out = drain(s)
    assert (out.code, out.why, out.left) == (sidecar.EXIT_LEFT, "spend cap", 3)
    assert len(candidate_files(rdir)) == 2
    assert json.loads((rdir / "analyst" / "calls.json").read_text())["calls"] == 2
    out = drain(s)
    assert (out.code, out.left) == (sidecar.EXIT_LEFT, 3) and len(srv.requests) == 2
    out = drain(dataclasses.replace(s, max_calls=5))
    assert out.code == 0 and len(srv.requests) == 5


def test_rate_cap_spaces_requests(tmp_path, srv):
    rdir = make_round(tmp_path, 3)
    assert drain(settings(rdir, srv, batch_size=1, max_rpm=120)).code == 0
    # 0.5 s apart where the sidecar takes its slots; as the server sees them, less the first
    # request's connection (see the concurrent test below).
    gaps = [b.t - a.t for a, b in zip(srv.requests, srv.requests[1:], strict=False)]
    assert len(gaps) == 2 and min(gaps) >= 0.25 and sum(gaps) >= 0.75, gaps


def test_a_drain_keeps_analyst_concurrency_requests_in_flight(tmp_path, srv):
    """The round's end waits for the drain (compile needs it): with ANALYST_CONCURRENCY=4, eight
    slow batches are four requests at a time, each written once, every request counted."""
    rdir = make_round(tmp_path, 8)
    srv.default = slow(0.4)
    out = drain(settings(rdir, srv, batch_size=1, concurrency=4))
    assert (out.code, out.why, out.left) == (0, "drained", 0)
    assert len(srv.requests) == 8 and srv.max_in_flight == 4
    assert_exactly_once(rdir, [f"r0-s{k // 2}-g{k % 2}-i0" for k in range(8)])
    assert json.loads((rdir / "analyst" / "calls.json").read_text())["calls"] == 8
    assert stats(rdir)["records_processed"] == 8 and stats(rdir)["proposals"] == 8
    assert sorted(e["event"] for e in ledger_events(rdir)) == ["planned"] * 8 + ["written"] * 8


def test_concurrent_requests_still_keep_the_rate_cap(tmp_path, srv):
    rdir = make_round(tmp_path, 4)
    srv.default = slow(0.3)
    assert drain(settings(rdir, srv, batch_size=1, max_rpm=120, concurrency=4)).code == 0
    # Slots are 0.5 s apart where the sidecar takes them; the server sees each request some time
    # after (a thread's wake-up, the first request's connection), which on a loaded machine may delay
    # one request past the next one's slot: two neighbours read 0.12 s apart at a load of 8
    # (2026-12-07). No request comes before its slot, so request k arrives at least 0.5 k s after the
    # first's slot, less the first's own delay. Sent all at once (no slot lock), four requests
    # arrive within ~0.1 s.
    starts = sorted(r.t for r in srv.requests)
    spans = [t - starts[0] for t in starts]
    assert len(starts) == 4 and spans[2] >= 0.4 and spans[3] >= 1.0, spans


def test_a_spend_cap_reached_by_concurrent_requests_is_kept(tmp_path, srv):
    rdir = make_round(tmp_path, 9)
    srv.default = slow(0.2)
    out = drain(settings(rdir, srv, batch_size=1, max_calls=5, concurrency=3))
    assert (out.code, out.why, out.left) == (sidecar.EXIT_LEFT, "spend cap", 4)
    assert len(srv.requests) == 5 and len(candidate_files(rdir)) == 5


def test_bad_spool_files_are_quarantined_not_fatal(tmp_path, srv):
    rdir = make_round(tmp_path, 2)
    spool = rdir / "spool"
    (spool / "r0-s5-g0-i0.json").write_text("{not json")
    (spool / "r0-s6-g0-i0.json").write_text(json.dumps({"id": "r0-s6-g0-i0"}))
    wrong = json.loads((spool / "r0-s0-g0-i0.json").read_text())
    (spool / "r0-s7-g0-i0.json").write_text(json.dumps(wrong))  # content of another id
    (spool / ".r0-s8-g0-i0.json.abc.tmp").write_text("{half")  # a writer's temp file: ignored
    s = settings(rdir, srv)
    assert drain(s).code == 0
    assert_exactly_once(rdir, ["r0-s0-g0-i0", "r0-s0-g1-i0"])
    q = {e["file"]: e["reason"] for e in ledger_events(rdir) if e["event"] == "quarantined"}
    assert sorted(q) == ["r0-s5-g0-i0.json", "r0-s6-g0-i0.json", "r0-s7-g0-i0.json"]
    assert "not valid JSON" in q["r0-s5-g0-i0.json"] and "spool.schema.json" in q["r0-s6-g0-i0.json"]
    assert "does not match" in q["r0-s7-g0-i0.json"]
    n_events = len(ledger_events(rdir))
    drain(s)
    assert len(ledger_events(rdir)) == n_events  # same bad bytes: not quarantined twice
    (spool / "r0-s5-g0-i0.json").unlink()
    add_records(rdir, [10])  # r0-s5-g0-i0 again, now a valid record: released and processed
    assert drain(s).code == 0
    assert "r0-s5-g0-i0" in {r for d in candidate_files(rdir).values() for r in d["record_ids"]}
    assert stats(rdir)["records_quarantined"] == 2


def test_restart_rebuilds_the_ledger_from_candidate_files(tmp_path, srv):
    rdir = make_round(tmp_path, 6)
    s = settings(rdir, srv)
    assert drain(s).code == 0
    # A crash after the rename of a candidate file but before its ledger line, plus a temp file
    # that a SIGKILL inside write_json_atomic left behind:
    (rdir / "analyst" / "ledger.jsonl").unlink()
    (rdir / "candidates" / ".0123456789abcdef.json.x1.tmp").write_text('{"half": ')
    assert drain(s).code == 0
    assert len(srv.requests) == 2  # nothing re-sent
    assert_exactly_once(rdir, [f"r0-s{k // 2}-g{k % 2}-i0" for k in range(6)])
    assert [e["event"] for e in ledger_events(rdir)] == ["recovered", "recovered"]


def test_unexpected_error_in_one_batch_does_not_stop_the_others(tmp_path, srv, monkeypatch):
    rdir = make_round(tmp_path, 6)
    real = prompt.build_messages

    def flaky(records):
        if records[0]["id"] == "r0-s0-g0-i0":
            raise RuntimeError("bug in the prompt builder")
        return real(records)

    monkeypatch.setattr(sidecar.prompt, "build_messages", flaky)
    stop, box = threading.Event(), {}  # the drain tries the failing batch again until stopped
    t = threading.Thread(target=lambda: box.update(out=sidecar.run(settings(rdir, srv), KEY, stop, drain=True)))
    t.start()
    wait_for("the other batch written", lambda: candidate_files(rdir))
    stop.set()
    t.join()
    out = box["out"]
    assert (out.code, out.left) == (sidecar.EXIT_LEFT, 3)
    assert len(candidate_files(rdir)) == 1 and stats(rdir)["errors"]["unexpected"] >= 1


def test_status_is_read_only(tmp_path, srv):
    rdir = make_round(tmp_path, 4)
    (rdir / "spool" / "r0-s9-g0-i0.json").write_text("{")
    st = sidecar.status(settings(rdir, srv))
    assert st["records_pending"] == 4 and list(st["quarantined"]) == ["r0-s9-g0-i0.json"]
    assert [len(b["records"]) for b in st["next_batches"]] == [3, 1]
    assert sorted(p.name for p in rdir.iterdir()) == ["spool"]  # nothing written
    assert drain(settings(rdir, srv)).code == 0
    assert {f"{b['batch_id']}.json" for b in st["next_batches"]} == set(candidate_files(rdir))
