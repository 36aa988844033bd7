"""Helpers shared by the analyst tests: spool records and checks on candidate files."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from pyhelpers.jsonfiles import validation_errors, write_json_exclusive

KEY = "sk-test-SECRET-123"


def spool_record(round_no: int, rollout: int, group: int, index: int, retry_ok: bool = True) -> dict:
    rid = f"r{round_no}-s{rollout}-g{group}-i{index}"
    failed = {"skills_shown": ["s-aaaa"], "reward": 0.25, "success": False, "termination": "over",
              "reward_detail": {"r_type": 1, "r_att": 0.5},
              "turns": [{"response": "I will search.", "action": "search[red shoes]",
                         "observation": "results page " * 80},
                        {"response": "Buying now.", "action": "click[buy now]", "observation": "done"}]}
    retry = {**failed, "skills_shown": ["s-aaaa", "s-bbbb"], "reward": 1.0 if retry_ok else 0.0,
             "success": retry_ok, "termination": "done"}
    return {"schema_version": 1, "id": rid, "round": round_no, "rollout_id": rollout, "group": group,
            "index": index, "task_id": f"task-{rollout}-{group}", "instruction": "buy red shoes under $30",
            "failed": failed, "retry": retry, "policy": {"model": "qwen3.5-4b", "iteration": rollout}}


def make_round(tmp_path: Path, n: int, round_no: int = 0, run: str = "qwen35-4b-train-100") -> Path:
    """runs/<run>/rounds/round-NNN with n spool records (rollouts 0.., 2 groups each)."""
    rdir = tmp_path / "runs" / run / "rounds" / f"round-{round_no:03d}"
    add_records(rdir, range(n), round_no)
    return rdir


def add_records(rdir: Path, numbers, round_no: int = 0) -> list[str]:
    ids = []
    for k in numbers:
        rec = spool_record(round_no, k // 2, k % 2, 0)
        write_json_exclusive(rdir / "spool" / f"{rec['id']}.json", rec)
        ids.append(rec["id"])
    return ids


def candidate_files(rdir: Path) -> dict[str, dict]:
    return {f.name: json.loads(f.read_text()) for f in sorted((rdir / "candidates").glob("*.json"))}


def assert_exactly_once(rdir: Path, expected_ids) -> dict[str, dict]:
    """Every expected record is in exactly one candidate file; every file is complete and valid;
    no temp file is left in candidates/."""
    files = candidate_files(rdir)
    for name, doc in files.items():
        assert validation_errors(doc, "candidates") == [], name
        assert name == f"{doc['batch_id']}.json"
    seen = Counter(rid for doc in files.values() for rid in doc["record_ids"])
    assert sorted(seen) == sorted(expected_ids)
    assert set(seen.values()) == {1}, seen
    leftovers = [p.name for p in (rdir / "candidates").iterdir() if p.name.startswith(".")]
    assert leftovers == []
    return files


def ledger_events(rdir: Path) -> list[dict]:
    path = rdir / "analyst" / "ledger.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
