"""The slime stand-in's eval hook (tests/fakes/slime_stub/train.py, item 7 of its doc) against slime
624b824's rules: its checks of the eval flags (utils/arguments.py:1747-1754, 1840-1841, 1968-1969),
when train.py evaluates (35-36, 50-51, 90-91; utils/misc.py:107-128), and what RolloutManager.eval
calls and logs (ray/rollout.py:513-526; observability/rollout_metrics.py:223-253)."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest
from conftest import FAKES

BASE = ["--num-rollout", "6", "--save-interval", "3", "--rollout-function-path", "plugin.generate_rollout"]


@pytest.fixture(scope="module")
def train():
    spec = importlib.util.spec_from_file_location("fake_slime_train_for_eval", FAKES / "slime_stub" / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _refused(train, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        train.parse(argv)
    return str(exc.value.code)


def test_the_stand_in_checks_the_eval_flags_as_slime_does(train, capsys):
    assert "Evaluation datasets must be configured when eval_interval is set" in _refused(
        train, [*BASE, "--eval-interval", "3"])
    assert "name/path pairs" in _refused(train, [*BASE, "--eval-interval", "3", "--eval-prompt-data", "a", "b", "c"])
    assert _refused(train, [*BASE, "--eval-config", "eval.yaml"]) == "2"
    assert "--eval-config is not modelled" in capsys.readouterr().err
    args = train.parse([*BASE, "--eval-interval", "3", "--eval-prompt-data", "val.jsonl"])
    assert args.eval_datasets == [{"name": "aime", "path": "val.jsonl"}]  # one value: aime's path
    assert args.eval_function_path == "plugin.generate_rollout"  # the rollout function by default
    args = train.parse([*BASE, "--eval-interval", "3", "--eval-prompt-data", "shopsim_val", "v.jsonl",
                        "--eval-function-path", "plugin.evaluate"])
    assert (args.eval_datasets, args.eval_function_path) == ([{"name": "shopsim_val", "path": "v.jsonl"}], "plugin.evaluate")
    assert train.parse(BASE).eval_interval is None


def _evaluated(train, argv: list[str], start: int = 0) -> list[tuple[str, int]]:
    """Where the stand-in's main evaluates, in its order, for a job starting at `start`."""
    from slime.utils.misc import should_run_periodic_action

    args = train.parse(argv)
    out = [("alone", 0)] if train.eval_only(args) else []
    for rollout_id in range(start, args.num_rollout):
        if train.eval_before_train(args, rollout_id):
            out.append(("before", rollout_id))
        if should_run_periodic_action(rollout_id, args.eval_interval):
            out.append(("after", rollout_id))
    return out


def test_the_stand_in_evaluates_where_slime_s_train_py_does(train):
    with_eval = [*BASE, "--eval-prompt-data", "v.jsonl", "--eval-interval"]
    assert _evaluated(train, [*with_eval, "3"]) == [("before", 0), ("after", 2), ("after", 5)]
    assert _evaluated(train, [*with_eval, "3", "--skip-eval-before-train"]) == [("after", 2), ("after", 5)]
    assert _evaluated(train, [*with_eval, "3"], start=3) == [("after", 5)]  # a resumed job: none before
    # not forced at the last rollout, unlike the save (train.py:71-72 passes num_rollout, 90 does not)
    assert _evaluated(train, [*with_eval, "4", "--skip-eval-before-train"]) == [("after", 3)]
    zero = ["--num-rollout", "0", "--save-interval", "3", "--rollout-function-path", "p.f"]
    assert _evaluated(train, [*zero, "--eval-prompt-data", "v.jsonl", "--eval-interval", "3"]) == [("alone", 0)]
    assert _evaluated(train, BASE) == []
    from slime.utils.misc import should_run_periodic_action

    assert [r for r in range(6) if should_run_periodic_action(r, 4, None, 6)] == [3, 5]  # the save's rule


def test_the_rollout_manager_s_eval_calls_the_function_for_evaluation_and_logs_its_rewards(train):
    from slime.rollout.base_types import RolloutFnEvalOutput

    calls = []

    def evaluate(args, rollout_id, data_source, evaluation=False):
        calls.append((rollout_id, data_source, evaluation))
        return RolloutFnEvalOutput(data={"shopsim_val": {"rewards": [1.0, 0.0, 1.0, 1.0]}},
                                   metrics={"eval/shopsim/episodes": 4})

    args = train.parse([*BASE, "--eval-interval", "3", "--eval-prompt-data", "v.jsonl"])
    manager = SimpleNamespace(args=args, eval_generate_rollout=evaluate, data_source="ds")
    logged = train.RolloutManager.eval(manager, 5)
    assert calls == [(5, "ds", True)]
    assert logged == {"eval/shopsim/episodes": 4, "eval/shopsim_val": 0.75, "eval/step": 5}
    # a legacy function returning the dict alone is wrapped as slime wraps it (base_types.py:19-26)
    manager.eval_generate_rollout = lambda *a, evaluation: {"v": {"rewards": [0.5], "truncated": [0, 1]}}
    assert train.RolloutManager.eval(manager, 2) == {"eval/v": 0.5, "eval/v-truncated_ratio": 0.5, "eval/step": 2}
    manager.eval_generate_rollout = lambda *a, evaluation: {"v": {"rewards": []}}
    with pytest.raises(ZeroDivisionError):  # slime's own failure on a key with no rewards (rollout_metrics.py:232)
        train.RolloutManager.eval(manager, 2)
    manager.args.debug_train_only = True
    assert train.RolloutManager.eval(manager, 2) is None  # nothing to evaluate in train-only mode
