"""The run's own files the next stages read are validated in the preflight, naming file and field,
before ShopSimulator, Ray or the slime job start; and a stage's failure keeps its file in the run's
final error."""

from __future__ import annotations

import json

import pytest

from pyhelpers.config import load
from pyhelpers.doctor.runner import run_checks
from pyhelpers.errors import ToolkitError
from pyhelpers.loop.loop import Loop
from pyhelpers.run import layout
from pyhelpers.skills.bank import empty_bank, write_bank
from pyhelpers.stages import inputs, position, preflight

CANDIDATES = {"schema_version": 1, "batch_id": "0123456789abcdef", "round": 0, "record_ids": ["r1"],
              "analyst_model": "m", "prompt_hash": "0" * 64, "status": "ok", "reason": None, "proposals": []}


def _doctor(env, fresh_run=False):
    cfg = load.load(env)
    [res] = run_checks(cfg, env, "rehearse", only=["run-files"], fresh_run=fresh_run)
    return res


@pytest.fixture
def lay(toolkit_env):
    return layout.from_config(load.load(toolkit_env))


def test_a_truncated_round_bank_fails_the_preflight_naming_the_file(toolkit_env, lay):
    bank = lay.bank_in(0)
    bank.parent.mkdir(parents=True)
    bank.write_bytes(json.dumps(empty_bank(0)).encode()[:40])
    res = _doctor(toolkit_env)
    assert res.status == "FAIL", res
    assert str(bank) in res.found and "not valid JSON" in res.found
    assert "make resume" in res.fix


def test_a_wrong_schema_candidates_file_is_named_with_its_field(toolkit_env, lay):
    write_bank(lay.bank_in(0), empty_bank(0))
    bad = lay.round_dir(0) / "candidates" / "0123456789abcdef.json"
    bad.parent.mkdir(parents=True)
    bad.write_text(json.dumps({**CANDIDATES, "round": "zero"}))
    (lay.round_dir(0) / "candidates" / "fedcba9876543210.json").write_text(json.dumps(CANDIDATES))
    res = _doctor(toolkit_env)
    assert res.status == "FAIL" and res.found.startswith("1 of 3 file(s)"), res
    assert str(bad) in res.found and "$.round" in res.found
    assert "analyst" in res.fix


def test_seed_bank_is_checked_for_a_new_run_and_by_a_fresh_rehearsal(toolkit_env, tmp_path, lay):
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps({**empty_bank(0), "skills": "none"}))
    env = {**toolkit_env, "SEED_BANK": str(seed)}
    for fresh in (False, True):
        res = _doctor(env, fresh_run=fresh)
        assert res.status == "FAIL" and str(seed) in res.found and "$.skills" in res.found, res
        assert "SEED_BANK" in res.fix
    # A fresh rehearsal reads nothing of the previous one: its broken bank is not an error then.
    lay.bank_in(0).parent.mkdir(parents=True)
    lay.bank_in(0).write_text("{")
    assert _doctor(toolkit_env, fresh_run=True).status == "PASS"
    assert _doctor(toolkit_env).status == "FAIL"


def test_the_decisions_read_by_inject_are_checked(toolkit_env, lay):
    write_bank(lay.compiled(0), empty_bank(0))
    decisions = lay.round_dir(0) / "gate" / "decisions.json"
    decisions.parent.mkdir(parents=True)
    decisions.write_text(json.dumps({"schema_version": 1, "round": 0, "bank_sha256": "xyz", "decisions": {}}))
    found = preflight.upcoming(lay, position.Position(0, "inject", ""), None)
    assert [i.path for i in found] == [lay.compiled(0), decisions]
    problems = [inputs.problem(i) for i in found]
    assert problems[0] is None
    assert str(decisions) in problems[1] and "$.bank_sha256" in problems[1]


def test_a_new_run_with_no_seed_bank_passes(toolkit_env):
    res = _doctor(toolkit_env)
    assert res.status == "PASS" and "new run" in res.found


def test_the_runs_final_error_keeps_the_file_and_the_fix(toolkit_env, lay):
    cfg = load.load(toolkit_env)
    loop = Loop(cfg, lay, [], echo=lambda s: None, notifier=_Quiet())
    lay.run_dir.mkdir(parents=True)
    exc = ToolkitError("invalid candidates", "/runs/x/rounds/round-000/candidates/ab.json at $.round: 'zero' is "
                       "not of type 'integer'", "fix the file or regenerate it")
    with pytest.raises(ToolkitError) as got:
        loop._failed(0, "compile", exc)
    text = str(got.value)
    assert "/runs/x/rounds/round-000/candidates/ab.json at $.round" in text
    assert "fix the file or regenerate it" in text


class _Quiet:
    def send(self, *a, **k):
        pass

    def close(self):
        pass


def test_a_resumed_rehearsal_with_a_truncated_bank_stops_in_its_preflight(tmp_path, rehearsal_world):
    from support.rehearsal import Run, in_rehearsal, pyhelpers_cmd, rehearse, rehearse_env

    env = rehearse_env(tmp_path, rehearsal_world)
    run = Run(tmp_path / "runs")
    init = in_rehearsal(env, *pyhelpers_cmd("run", "init", "--rehearsal"))
    assert init.returncode == 0, init.stderr
    bank = run.round_dir(0) / "skillbank.json"
    bank.parent.mkdir(parents=True)
    bank.write_text('{"schema_version": 1, "round": 0, "sk')
    res = rehearse(env, "--resume", timeout=300)
    assert res.returncode == 1, res.stdout[-3000:]
    # make train's preflight shows the check's fix, which names the file; the full report what is wrong with it
    assert "FAIL  run-files" in res.stdout and f"move {bank} aside" in " ".join(res.stdout.split()), res.stdout[-3000:]
    assert "the full report: make doctor PROFILE=rehearse" in res.stdout
    assert not (run.run_dir / "logs" / "shopsim.log").exists()  # nothing was started
    assert list((run.run_dir / "pids").glob("*.json")) == []
