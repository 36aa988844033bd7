"""slime's real parse_args and load_function on what the toolkit passes (issue 42): the exact argv
`make plan` shows for train.py (MODEL_ARGS of slime's own scripts/models/qwen3.5-4B.sh first), on
one node and on two, and every custom function path of the plugin's flags."""

from __future__ import annotations

from pathlib import Path

import pytest
from call_sites import SlimeRefused, rollout_call
from plan import plan_argv, slime_args

from pyhelpers.rollout import flags as plugin


@pytest.mark.parametrize("nnodes", [1, 2])
def test_slimes_parse_args_takes_the_plans_argv(tmp_path, monkeypatch, sm80, nnodes):
    cfg, argv = plan_argv(tmp_path, nnodes)
    print(f"NNODES={nnodes}: train.py {' '.join(argv)}")
    args = slime_args(cfg, argv, monkeypatch)
    assert args.actor_num_nodes == nnodes
    assert args.rollout_function_path == plugin.ROLLOUT_FUNCTION
    assert args.custom_generate_function_path == plugin.GENERATE_FUNCTION
    assert args.dynamic_sampling_filter_path == plugin.DYNAMIC_FILTER
    assert args.custom_reward_post_process_path == plugin.REWARD_POST_PROCESS
    assert (args.input_key, args.label_key) == (plugin.INPUT_KEY, plugin.LABEL_KEY)


@pytest.mark.parametrize("nnodes", [1, 2])
def test_slimes_parse_args_takes_the_one_job_modes_argv(tmp_path, monkeypatch, sm80, nnodes):
    """The one-job mode's job as `make plan` shows it: slime reads its eval flags as the hook needs
    them (the interval a round, the function, evaluation data named: arguments.py:1840-1841)."""
    cfg, argv = plan_argv(tmp_path, nnodes, one_job=True)
    print(f"NNODES={nnodes}, one job: train.py {' '.join(argv)}")
    args = slime_args(cfg, argv, monkeypatch)
    assert args.num_rollout == cfg.ROUNDS * cfg.STEPS_PER_ROUND and args.eval_interval == cfg.STEPS_PER_ROUND
    assert args.eval_function_path == plugin.EVAL_FUNCTION and args.skip_eval_before_train
    assert args.rollout_function_path == plugin.ROLLOUT_FUNCTION and not args.save_hf


@pytest.mark.parametrize("path", [plugin.ROLLOUT_FUNCTION, plugin.GENERATE_FUNCTION, plugin.DYNAMIC_FILTER,
                                  plugin.REWARD_POST_PROCESS, plugin.EVAL_FUNCTION])
def test_slimes_load_function_finds_every_plugin_path(path):
    from slime.utils.misc import load_function

    fn = load_function(path)
    assert callable(fn) and f"{fn.__module__}.{fn.__name__}" == path


@pytest.mark.parametrize("evaluation", [False, True])
def test_the_plugins_rollout_signature_fits_slimes_call_site(evaluation):
    """slime calls the rollout function through call_rollout_fn (slime/rollout/base_types.py:19-20,
    from slime/ray/rollout.py:504-592): the plugin's real signature must take that call
    (tests_slime/call_sites.py rollout_call)."""
    assert rollout_call(plugin.ROLLOUT_FUNCTION, evaluation) is not None


def test_a_plugin_without_the_evaluation_parameter_fails_at_slimes_call_site(tmp_path, monkeypatch):
    """The contract broken on purpose: a copy of the plugin's rollout module whose generate_rollout
    calls its last parameter `eval_mode` is refused, named at slime's call (base_types.py:20)."""
    import importlib

    real = importlib.import_module(plugin.ROLLOUT_FUNCTION.rsplit(".", 1)[0])
    text = Path(real.__file__).read_text()
    broken = text.replace("evaluation: bool = False) -> Any:", "eval_mode: bool = False) -> Any:")
    assert broken != text, "the plugin's generate_rollout signature moved: update this test's edit"
    (tmp_path / "broken_plugin").mkdir()
    (tmp_path / "broken_plugin" / "__init__.py").write_text("")
    (tmp_path / "broken_plugin" / "rollout.py").write_text(broken)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SlimeRefused) as refused:
        rollout_call("broken_plugin.rollout.generate_rollout", evaluation=False)
    print(refused.value)
    assert "at slime/rollout/base_types.py:20:" in str(refused.value)
    assert "evaluation" in str(refused.value)
