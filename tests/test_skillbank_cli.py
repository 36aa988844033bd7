"""SkillBank commands (show, diff, compile, inject, select) and decision application."""

from __future__ import annotations

import hashlib
import json

import pytest
from click.testing import CliRunner
from conftest import run_pyhelpers
from support.skillbank import bank_of, batch, prop, sid, write_batches

from pyhelpers.cli import main
from pyhelpers.errors import ToolkitError
from pyhelpers.jsonfiles import canonical_bytes
from pyhelpers.skills.bank import bank_sha256, load_bank, write_bank
from pyhelpers.skills.decisions import Caps, apply_decisions, select_for_gate

T = [(f"the page shows case {n}", f"do the thing number {n} before anything else") for n in range(8)]
CAPS = Caps(max_active=10, token_budget=10_000, max_gate_rounds=3)


def _dec(decision, est=0.05, lo=0.01, hi=0.09, n=64):
    return {"decision": decision, "estimate": est, "ci_low": lo, "ci_high": hi, "n": n}


def _by(bank):
    return {s["id"]: s for s in bank["skills"]}


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


# ---- apply_decisions / select_for_gate -----------------------------------------------------

def test_decisions_move_statuses():
    bank = bank_of(T[:6], ["candidate", "candidate", "probation", "probation", "active", "active"])
    by = _by(bank)
    by[sid(*T[3])]["counters"]["gate_rounds"] = 2          # third test: keep -> retired
    decisions = {sid(*T[0]): _dec("accept"), sid(*T[1]): _dec("reject", -0.1, -0.2, -0.01),
                 sid(*T[2]): _dec("keep", 0.0, -0.05, 0.05), sid(*T[3]): _dec("keep", 0.0, -0.05, 0.05),
                 sid(*T[4]): _dec("keep"), sid(*T[5]): _dec("retire", 0.0, -0.01, 0.01)}
    out = apply_decisions(bank, decisions, 0, CAPS)
    got = {i: s["status"] for i, s in _by(out).items()}
    assert [got[sid(*t)] for t in T[:6]] == ["active", "rejected", "probation", "retired", "active", "retired"]
    s0 = _by(out)[sid(*T[0])]
    assert s0["gate"] == [{"round": 0, **_dec("accept")}] and s0["counters"]["gate_rounds"] == 1
    assert s0["history"][-1]["op"] == "ACCEPT" and "+0.0500" in s0["history"][-1]["note"]
    assert "not proven" in _by(out)[sid(*T[3])]["history"][-1]["note"]
    assert out["round"] == 1 and out["parent_sha256"] == bank_sha256(bank)
    assert out["config"]["inject"] == {"max_active": 10, "token_budget": 10_000, "max_gate_rounds": 3}
    assert canonical_bytes(apply_decisions(bank, dict(reversed(decisions.items())), 0, CAPS)) == canonical_bytes(out)


def test_decisions_on_unknown_or_dead_skills_are_refused():
    bank = bank_of(T[:2], ["candidate", "rejected"])
    with pytest.raises(ToolkitError, match="not in the bank"):
        apply_decisions(bank, {"sk-000000000000": _dec("accept")}, 0, CAPS)
    with pytest.raises(ToolkitError, match="rejected skill"):
        apply_decisions(bank, {sid(*T[1]): _dec("accept")}, 0, CAPS)


def test_caps_keep_the_best_lower_bounds_and_retire_the_rest():
    bank = bank_of(T[:5], ["candidate"] * 5)
    lows = [0.04, 0.02, 0.05, 0.01, 0.03]
    decisions = {sid(*t): _dec("accept", lo + 0.02, lo, lo + 0.04) for t, lo in zip(T, lows, strict=False)}
    out = apply_decisions(bank, decisions, 2, Caps(max_active=3, token_budget=10_000, max_gate_rounds=3))
    by = _by(out)
    assert {i for i, s in by.items() if s["status"] == "active"} == {sid(*T[2]), sid(*T[0]), sid(*T[4])}
    assert by[sid(*T[3])]["history"][-1] == {"round": 2, "op": "CAP", "note": "over BANK_MAX_ACTIVE"}
    one = by[sid(*T[2])]["render"]["tokens"] + bank["tokenizer"]["header_tokens"]
    out = apply_decisions(bank, decisions, 2, Caps(max_active=10, token_budget=one, max_gate_rounds=3))
    assert [s["id"] for s in out["skills"] if s["status"] == "active"] == [sid(*T[2])]
    assert _by(out)[sid(*T[0])]["history"][-1]["note"] == "over SKILL_TOKEN_BUDGET"


def test_select_for_gate_prefers_probation_then_proposals():
    bank = bank_of(T[:6], ["candidate", "candidate", "probation", "active", "candidate", "retired"])
    by = _by(bank)
    by[sid(*T[4])]["counters"]["proposals"] = 9
    ids = select_for_gate(bank, 3)
    assert ids == [sid(*T[2]), sid(*T[4]), min(sid(*T[0]), sid(*T[1]))]
    assert select_for_gate(bank, 10, include_active=True)[0] == sid(*T[3])
    assert len(select_for_gate(bank, 10)) == 4


# ---- CLI -----------------------------------------------------------------------------------

def _round0(tmp_path):
    bank = bank_of(T[:3], ["active", "candidate", "probation"])
    _by(bank)[sid(*T[0])]["gate"] = [{"round": 0, **_dec("accept", 0.052, -0.01, 0.114, 128)}]
    write_bank(tmp_path / "b.json", bank)
    return bank


def test_show_table_and_json(tmp_path):
    _round0(tmp_path)
    res = _cli("skillbank", "show", tmp_path / "b.json")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert "1 active, 1 probation, 1 candidate" in lines[0]
    assert lines[1].split()[:4] == ["id", "status", "title", "tokens"]
    active = next(line for line in lines if " active " in line)
    assert active.startswith(sid(*T[0])) and "+0.052 [-0.010, +0.114] n=128 accept r0" in active
    res = _cli("skillbank", "show", tmp_path / "b.json", "--json", "--status", "candidate")
    rows = json.loads(res.output)["skills"]
    assert [r["status"] for r in rows] == ["candidate"] and rows[0]["last_gate"] is None


def test_diff_lists_added_removed_and_status_changes(tmp_path):
    bank = _round0(tmp_path)
    other = json.loads(json.dumps(bank))
    gone = other["skills"].pop(1)
    other["skills"][0]["status"] = "retired"
    other["skills"] = sorted(other["skills"] + bank_of([T[5]])["skills"], key=lambda s: s["id"])
    other["round"] = 1
    write_bank(tmp_path / "o.json", other)
    res = _cli("skillbank", "diff", tmp_path / "b.json", tmp_path / "o.json")
    assert res.exit_code == 0, res.output
    out = res.output
    assert "round 0 -> 1: 1 added, 1 removed, 1 status changes" in out
    assert f"+ {sid(*T[5])}" in out and f"- {gone['id']}" in out
    assert f"~ {bank['skills'][0]['id']}  {bank['skills'][0]['status']} -> retired" in out
    d = json.loads(_cli("skillbank", "diff", tmp_path / "b.json", tmp_path / "o.json", "--json").output)
    assert [r["id"] for r in d["added"]] == [sid(*T[5])]


def test_compile_then_inject_end_to_end(tmp_path, toolkit_env):
    _round0(tmp_path)
    cands = write_batches(tmp_path / "cands", [batch([prop(*T[4]), prop(*T[4])]), batch([prop(*T[6])], status="rejected")])
    spool = tmp_path / "spool"
    spool.mkdir()
    ep = {"skills_shown": [sid(*T[0])], "turns": [], "reward": 1.0, "success": True, "termination": "done"}
    rec = {"schema_version": 1, "id": "r0-s1-g0-i0", "round": 0, "rollout_id": 1, "group": 0, "index": 0,
           "task_id": "t1", "failed": dict(ep, success=False, reward=0.0), "retry": ep, "policy": {"iteration": 1}}
    (spool / "r0-s1-g0-i0.json").write_text(json.dumps(rec))
    toolkit_env["SKILL_MAX_TOKENS"] = "120"
    res = run_pyhelpers(["skillbank", "compile", "--bank", str(tmp_path / "b.json"), "--candidates", str(cands),
                         "--spool", str(spool), "--out", str(tmp_path / "c.json")], toolkit_env)
    assert res.returncode == 0, res.stderr
    compiled = load_bank(tmp_path / "c.json")
    assert hashlib.sha256((tmp_path / "c.json").read_bytes()).hexdigest() in res.stdout
    assert compiled["config"]["compile"]["max_skill_tokens"] == 120
    by = _by(compiled)
    assert by[sid(*T[4])]["counters"]["proposals"] == 2 and sid(*T[6]) not in by
    assert by[sid(*T[0])]["counters"]["retry_successes"] == 1
    assert compiled["parent_sha256"] == hashlib.sha256((tmp_path / "b.json").read_bytes()).hexdigest()

    gated = json.loads(_cli("skillbank", "select", tmp_path / "c.json", "--max", "2").output)
    assert gated == [sid(*T[2]), sid(*T[4])]
    doc = {"schema_version": 1, "round": 0, "bank_sha256": bank_sha256(compiled),
           "decisions": {gated[0]: _dec("accept"), gated[1]: dict(_dec("keep", 0.0, -0.1, 0.1), extra="ok")}}
    (tmp_path / "d.json").write_text(json.dumps(doc))
    res = _cli("skillbank", "inject", "--compiled", tmp_path / "c.json", "--decisions", tmp_path / "d.json",
               "--out", tmp_path / "next.json")
    assert res.exit_code == 0, res.output
    nxt = load_bank(tmp_path / "next.json")
    assert nxt["round"] == 1 and nxt["parent_sha256"] == bank_sha256(compiled)
    assert (_by(nxt)[gated[0]]["status"], _by(nxt)[gated[1]]["status"]) == ("active", "probation")
    assert nxt["config"]["inject"]["max_active"] == 24  # BANK_MAX_ACTIVE default

    doc["bank_sha256"] = "0" * 64
    (tmp_path / "d2.json").write_text(json.dumps(doc))
    res = _cli("skillbank", "inject", "--compiled", tmp_path / "c.json", "--decisions", tmp_path / "d2.json",
               "--out", tmp_path / "x.json")
    assert res.exit_code == 1 and "another bank" in res.output and not (tmp_path / "x.json").exists()
    doc["decisions"][gated[0]]["decision"] = "maybe"
    (tmp_path / "d3.json").write_text(json.dumps(doc))
    res = _cli("skillbank", "inject", "--compiled", tmp_path / "c.json", "--decisions", tmp_path / "d3.json",
               "--out", tmp_path / "x.json")
    assert res.exit_code == 1 and f"$.decisions['{gated[0]}'].decision" in res.output and "rule: enum" in res.output


def test_compile_errors_are_one_line_with_the_file(tmp_path, toolkit_env):
    _round0(tmp_path)
    cands = tmp_path / "cands"
    cands.mkdir()
    (cands / "bad.json").write_text("{not json")
    res = run_pyhelpers(["skillbank", "compile", "--bank", str(tmp_path / "b.json"), "--candidates", str(cands),
                         "--out", str(tmp_path / "c.json")], toolkit_env)
    assert res.returncode == 1 and "bad.json" in res.stderr and "Traceback" not in res.stderr
    res = _cli("skillbank", "compile", "--bank", tmp_path / "nope.json", "--candidates", cands, "--out", tmp_path / "c.json")
    assert res.exit_code == 1 and "file not found" in res.output
    res = _cli("skillbank", "show", tmp_path / "c.json")
    assert res.exit_code == 1 and "file not found" in res.output


def test_change_summary_names_the_final_bank():
    from pathlib import Path

    from pyhelpers.skills.steps import change_summary

    old = {"round": 1, "skills": [], "tokenizer": {"name": "t"}}
    new = {"round": 2, "skills": [], "tokenizer": {"name": "t"}}
    line = change_summary(old, new, out=Path("skillbank-final.json"), sha="abc", label="final bank (after round 1, the last)")
    assert line.startswith("final bank (after round 1, the last): ") and "round 2" not in line
    assert change_summary(old, new, out=Path("skillbank.json"), sha="abc").startswith("round 2: ")
