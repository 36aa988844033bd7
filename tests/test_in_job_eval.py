"""The one-job mode's eval hook (pyhelpers/rollout/in_job_eval.py) refuses, before it plays anything,
what would waste a round's evaluation: a rollout that ends no round, a job that saves debug
rollout data (slime would fail on the result once val was played), a multi-node run's gate token
it cannot read, a training call. Playing it: tests/test_eval.py and the slime lane."""

from __future__ import annotations

from argparse import Namespace

import pytest

from pyhelpers.errors import ToolkitError
from pyhelpers.rollout import in_job_eval, settings


def _args(toolkit_env, **values) -> Namespace:
    from pyhelpers.config import load
    from pyhelpers.run.layout import from_config

    cfg = load.load({**toolkit_env, "STEPS_PER_ROUND": "3"})
    mine = {**settings.plugin_values(cfg, from_config(cfg), 0), **values}
    return Namespace(**{settings.PREFIX + k: v for k, v in mine.items()}, sglang_router_ip="127.0.0.1",
                     sglang_router_port=1)


def test_each_rounds_last_rollout_is_its_round_and_any_other_is_refused_naming_eval_interval(toolkit_env):
    s = settings.from_args(_args(toolkit_env))
    assert [in_job_eval.round_of(s, i) for i in (2, 5, 14)] == [0, 1, 4]
    for rollout_id in (0, 1, 3):  # 0: slime's evaluation before training, without --skip-eval-before-train
        with pytest.raises(ToolkitError) as err:
            in_job_eval.round_of(s, rollout_id)
        assert err.value.where == "--eval-interval" and "--eval-interval 3 and --skip-eval-before-train" in err.value.fix


def test_what_would_waste_the_evaluation_is_refused_before_any_episode(toolkit_env, tmp_path):
    args = _args(toolkit_env)
    args.save_debug_rollout_data = str(tmp_path / "rollout_{rollout_id}.pt")
    with pytest.raises(ToolkitError) as err:
        in_job_eval.evaluate(args, 2, None)
    assert err.value.where == "--save-debug-rollout-data"
    with pytest.raises(ToolkitError) as err:
        in_job_eval.evaluate(_args(toolkit_env), 2, None, evaluation=False)
    assert err.value.where == "--rollout-function-path"
    # a multi-node run's hook where the run's gate token cannot be read (RUNS_DIR not shared): named
    gated = _args(toolkit_env, shopsim_token_path=str(tmp_path / "token"))
    with pytest.raises(ToolkitError) as err:
        in_job_eval.evaluate(gated, 2, None)
    assert err.value.where == str(tmp_path / "token") and "gate's token" in err.value.what
    assert "same shared directory on every node" in err.value.fix
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("episodes.jsonl"))


def test_a_job_of_one_round_keeps_its_settings_and_the_one_job_mode_s_job_moves_to_each_round_s_files(toolkit_env):
    """settings.for_rollout: today's job of round 1 (rollouts 3..5 at STEPS_PER_ROUND=3) keeps the
    YAML's settings for each of its rollouts; a job that goes on past its round (the one-job mode's)
    trains rollout 6 in round 2's directory with round 2's bank; a rollout before the job's round is
    refused."""
    from pathlib import Path

    from pyhelpers.run.layout import RoundFiles

    s = settings.from_args(_args(toolkit_env))
    r1 = settings.from_mapping({**s.__dict__, "round": 1, "round_dir": str(RoundFiles(Path(s.round_dir)).of_round(1).dir),
                                "bank_path": "/somewhere/skillbank.json"})
    assert all(r1.for_rollout(i) is r1 for i in (3, 4, 5))
    r2 = r1.for_rollout(6)
    files = RoundFiles(Path(s.round_dir)).of_round(2)
    assert (r2.round, r2.round_dir, r2.bank_path) == (2, str(files.dir), str(files.bank))
    assert r2.metrics_path == files.rollout_metrics and r2.spool_dir == files.spool
    assert {k: v for k, v in r2.__dict__.items() if k not in ("round", "round_dir", "bank_path")} == \
        {k: v for k, v in r1.__dict__.items() if k not in ("round", "round_dir", "bank_path")}
    with pytest.raises(ToolkitError) as err:
        r1.for_rollout(2)
    assert "rollout 2 is before round 1" in err.value.what and "--start-rollout-id" in err.value.fix


class _Reached(Exception):
    """The rollout function got past its bank check and marked its round started."""


def _stop_at_mark(monkeypatch, marked: list) -> None:
    from pyhelpers.rollout import rollout

    def mark(s, rollout_id):
        marked.append((s.round, rollout_id))
        raise _Reached

    monkeypatch.setattr(rollout, "_mark_started", mark)
    monkeypatch.setattr(rollout.slime_compat, "default_generate_rollout", lambda: None)


def test_a_job_past_its_round_stops_at_a_bank_that_does_not_come_before_it_marks_that_round_started(
        toolkit_env, monkeypatch):
    """The rollout function's first check of a round it moved to: the bank inject writes, named by
    path and by the knob that bounds the wait, before any marker lands in that round's directory;
    the job's own round (today's order: its bank is written before the job starts) is not waited for."""
    from pyhelpers.rollout import rollout

    args = _args(toolkit_env, bank_wait_timeout=0)
    s = settings.from_args(args)
    marked: list = []
    _stop_at_mark(monkeypatch, marked)
    with pytest.raises(ToolkitError) as err:
        rollout.generate_rollout(args, 3, data_source=None)
    assert err.value.where == s.for_rollout(3).bank_path and "round-001" in err.value.where
    assert "round 1's skill bank" in err.value.what and "BANK_WAIT_TIMEOUT" in err.value.what
    assert marked == []
    mine = _args(toolkit_env, bank_wait_timeout=0, bank_path=str(s.for_rollout(3).bank_path))
    with pytest.raises(ToolkitError) as err:
        rollout.generate_rollout(mine, 0, data_source=None)
    assert err.value.what == "the round's skill bank is missing"


def test_a_job_past_its_round_waits_for_the_bank_inject_writes_and_records_the_wait(toolkit_env, monkeypatch):
    """The one-job mode's first rollout of round r+1 comes right after round r's eval hook, before
    the driver injected round r+1's bank: it waits for it (BANK_WAIT_TIMEOUT), with a `bank-wait`
    event a watcher can show, then goes on; `bank-in` records the seconds waited."""
    import threading
    from pathlib import Path

    from pyhelpers.rollout import rollout
    from pyhelpers.run import events
    from pyhelpers.run.layout import RoundFiles
    from pyhelpers.skills.bank import empty_bank, write_bank
    from tests.support.rehearsal import wait_for

    args = _args(toolkit_env, bank_wait_timeout=600)
    s = settings.from_args(args)
    run_dir = RoundFiles(Path(s.round_dir)).run_dir
    marked: list = []
    _stop_at_mark(monkeypatch, marked)
    outcome: list = []

    def job():
        try:
            rollout.generate_rollout(args, 3, data_source=None)
        except BaseException as exc:  # noqa: BLE001 -- handed to the test's thread
            outcome.append(exc)

    t = threading.Thread(target=job, daemon=True)
    t.start()
    waiting = wait_for("the bank-wait event", lambda: [e for e in events.read(run_dir) if e["kind"] == "bank-wait"],
                       timeout=120)
    assert waiting[0]["round"] == 1 and waiting[0]["path"] == s.for_rollout(3).bank_path and marked == []
    bank = Path(s.for_rollout(3).bank_path)
    bank.parent.mkdir(parents=True, exist_ok=True)
    write_bank(bank, empty_bank(round=1))
    t.join(120)
    assert not t.is_alive() and len(outcome) == 1 and isinstance(outcome[0], _Reached), outcome
    assert marked == [(1, 3)]
    got = [e for e in events.read(run_dir) if e["kind"] == "bank-in"]
    assert len(got) == 1 and got[0]["round"] == 1 and got[0]["waited_s"] >= 0


def test_make_plan_shows_the_one_job_modes_command_line_beside_today_s(toolkit_env):
    """Both modes' slime jobs side by side: the one-job job spans the run (--num-rollout ROUNDS x
    STEPS_PER_ROUND), evaluates in the job at each round's end through the plugin's hook, and writes
    no HF copy from the GPUs; today's job of the round has none of the eval flags."""
    import shlex

    from pyhelpers.config import load
    from pyhelpers.overview import plan
    from pyhelpers.rollout import flags
    from pyhelpers.run.layout import from_config

    cfg = load.load({**toolkit_env, "STEPS_PER_ROUND": "3", "ROUNDS": "4", "SAVE_HF": "1", "ONE_JOB": "0"})
    lines = plan.plan(cfg, from_config(cfg), model_args=[])
    jobs = [shlex.split(x.split(": ", 1)[1]) for x in lines if x.lstrip().startswith("slime job")]
    assert len(jobs) == 2, lines
    today, one_job = jobs

    def value(argv, flag):
        return argv[argv.index(flag) + 1]

    assert value(today, "--num-rollout") == "3" and "--eval-interval" not in today and "--save-hf" in today
    assert value(one_job, "--num-rollout") == "12" and value(one_job, "--eval-interval") == "3"
    assert value(one_job, "--eval-function-path") == flags.EVAL_FUNCTION and "--skip-eval-before-train" in one_job
    at = one_job.index("--eval-prompt-data")
    assert one_job[at + 1:at + 3] == [flags.EVAL_KEY, str(cfg.VAL_TASKS)] and "--save-hf" not in one_job
    assert [a for a in one_job if a not in today] == ["12", "--eval-interval", "--eval-prompt-data", flags.EVAL_KEY,
                                                      str(cfg.VAL_TASKS), "--eval-function-path", flags.EVAL_FUNCTION]
    assert any("rounds 0..3" in x for x in lines)
    chosen = load.load({**toolkit_env, "STEPS_PER_ROUND": "3", "ROUNDS": "4", "ONE_JOB": "1"})
    lines = plan.plan(chosen, from_config(chosen), model_args=[])
    runs, other = [shlex.split(x.split(": ", 1)[1]) for x in lines if x.lstrip().startswith("slime job")]
    assert value(runs, "--num-rollout") == "12" and "--eval-interval" in runs  # ONE_JOB=1: the job it submits
    assert value(other, "--num-rollout") == "3" and "--eval-interval" not in other
    assert any(x.startswith("the round-by-round order (ONE_JOB=0)") for x in lines)
