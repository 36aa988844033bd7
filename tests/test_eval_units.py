"""Evaluation pieces on their own: episodes.jsonl repair, the slot ledger, intervals, the progress line."""

from __future__ import annotations

import io
import json

import pytest

from pyhelpers.errors import ToolkitError
from pyhelpers.evaluate import records, slots
from pyhelpers.evaluate.progress import Progress
from pyhelpers.evaluate.runner import DirLock, load_finished
from pyhelpers.evaluate.settings import EvalSettings
from pyhelpers.evaluate.stats import mean_ci, wilson


def rec(i: int, term: str = "done") -> dict:
    return {"id": f"e{i}", "termination": term, "success": i % 2 == 0}


def test_torn_last_line_is_dropped_and_cut(tmp_path):
    path = tmp_path / "episodes.jsonl"
    app = records.Appender(path)
    for i in range(3):
        app.append(rec(i))
    app.close()
    with open(path, "ab") as fh:
        fh.write(b'{"id": "e3", "termin')
    got = records.repair(path)
    assert [r["id"] for r in got] == ["e0", "e1", "e2"]
    assert path.read_bytes().endswith(b"\n") and path.read_bytes().count(b"\n") == 3
    path.write_bytes(path.read_bytes() + b"garbage\n" + json.dumps(rec(4)).encode() + b"\n")
    with pytest.raises(ToolkitError, match="line 4 is not an episode record"):
        records.read_records(path)


def test_resume_drops_infra_errors_and_refuses_without_resume(tmp_path):
    from pyhelpers.evaluate.episode import EpisodeSpec

    path = tmp_path / "episodes.jsonl"
    records.rewrite(path, [rec(0), rec(1, "infra_error"), rec(2)])
    specs = [EpisodeSpec(id=f"e{i}", task={"task_id": f"t{i}", "shopsim_idx": i}) for i in range(4)]
    with pytest.raises(ToolkitError, match="--resume"):
        load_finished(tmp_path, specs, resume=False)
    done, dropped = load_finished(tmp_path, specs, resume=True)
    assert sorted(done) == ["e0", "e2"] and dropped == 1
    assert [r["id"] for r in records.read_records(path)[0]] == ["e0", "e2"]  # exactly once after the replay
    with pytest.raises(ToolkitError, match="not in this run's plan"):
        load_finished(tmp_path, specs[1:], resume=True)


def test_slot_ledger_outstanding(tmp_path):
    path = tmp_path / "slots.jsonl"
    led = slots.SlotLedger(path)
    led.reset_sent("a#0")
    led.slot_held("a#0", 3)
    led.slot_done("a#0", 3, freed=True)       # released: nothing left
    led.reset_sent("b#0")
    led.slot_held("b#0", 5)                   # killed while holding slot 5
    led.reset_sent("c#0")                     # killed while its reset was on the way
    led.reset_sent("d#0")
    led.slot_done("d#0", None, freed=True)    # refused (no slot)
    led.reset_sent("e#0")
    led.slot_held("e#0", 7)
    led.slot_done("e#0", 7, freed=False)      # release failed / abandoned
    led.close()
    with open(path, "a") as fh:
        fh.write('{"op": "held", "ke')        # torn
    assert slots.outstanding(path) == ([5, 7], 1)
    assert slots.outstanding(tmp_path / "none.jsonl") == ([], 0)


def test_clean_up_frees_a_slot_beyond_the_pool_with_release_all_never_release_one(tmp_path):
    """A ledger from a run with a bigger pool (SHOPSIM_SLOTS lowered since): release_one(9) on a
    pool of 4 would add 9 to pack_api's free set (pack_api.py:81-83), poisoning later resets."""
    import asyncio

    from pyhelpers.shopsim.client import ShopSimClient

    path = tmp_path / "slots.jsonl"
    led = slots.SlotLedger(path)
    for key, env in (("a#0", 2), ("b#0", 9)):
        led.reset_sent(key)
        led.slot_held(key, env)
    led.close()
    sent = []

    class Recorder(ShopSimClient):
        async def _post(self, payload, timeout, instance=None, lease=None):  # the client's signature
            sent.append(payload)
            return {"result": {"message": "ok"}}

    async def go():
        async with Recorder("http://127.0.0.1:9", pool_size=4) as client:
            return await slots.clean_up(path, client)
    done = asyncio.run(go())
    assert done == {"released": [2], "release_all": True}
    assert sent == [{"action": "release_one", "env_idx": 2}, {"action": "release_all"}]
    assert path.read_text() == ""


def test_wilson_and_mean_intervals():
    w = wilson(30, 100)
    assert w["rate"] == 0.3 and w["ci_low"] == pytest.approx(0.2189, abs=1e-4)
    assert w["ci_high"] == pytest.approx(0.3958, abs=1e-4)  # textbook Wilson 95% for 30/100
    assert wilson(0, 10)["ci_low"] == 0.0 and wilson(0, 10)["ci_high"] == pytest.approx(0.2775, abs=1e-4)
    assert wilson(0, 0)["rate"] is None
    m = mean_ci([0.0, 1.0] * 50)
    assert m["mean"] == 0.5 and m["ci_low"] == pytest.approx(0.5 - 1.96 * 0.50252 / 10, abs=1e-3)


def test_progress_plain_lines_when_not_a_tty():
    out = io.StringIO()
    p = Progress("val", 4, already=1, stream=out, every_s=0.0)
    p.add(rec(0))
    p.add(rec(1, "infra_error"))
    p.add(rec(3))
    text = out.getvalue().splitlines()
    assert text[-1].startswith("val: 4/4 episodes, success 50.0%, infra errors 1") and "ETA -" in text[-1]
    assert "\r" not in out.getvalue()


def test_in_flight_never_exceeds_slots_and_dir_lock(tmp_path):
    s = EvalSettings(shopsim_url="x", server_url="y", tokenizer_dir="z", concurrency=64, slots=48, max_turns=20,
                     max_context_len=24576, max_response_len=4096, skill_token_budget=1024, episode_retries=3,
                     max_infra_share=0.05, reset_timeout_s=60.0, shopsim_ready_s=900.0)
    assert s.in_flight == 48
    with DirLock(tmp_path):
        with pytest.raises(ToolkitError, match="another evaluation"), DirLock(tmp_path):
            pass
