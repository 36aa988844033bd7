"""The one-job mode's eval hook (pyhelpers/rollout/in_job_eval.py) refuses, before it plays anything,
what would waste a round's evaluation: a rollout that ends no round, a job that saves debug
rollout data (slime would fail on the result once val was played), a multi-node run's simulator
behind the head's gate, a training call. Playing it: tests/test_eval.py and the slime lane."""

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
    gated = _args(toolkit_env, shopsim_token_path=str(tmp_path / "token"))
    with pytest.raises(ToolkitError) as err:
        in_job_eval.evaluate(gated, 2, None)
    assert err.value.where == "NNODES" and "head's gate" in err.value.what
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("episodes.jsonl"))
