"""slime's real parse_args and load_function on what the toolkit passes (issue 42): the exact argv
`make plan` shows for train.py (MODEL_ARGS of slime's own scripts/models/qwen3.5-4B.sh first), on
one node and on two, and every custom function path of the plugin's flags."""

from __future__ import annotations

import sys

import pytest
from plan import plan_argv

from pyhelpers.rollout import flags as plugin


@pytest.fixture
def sm80(monkeypatch):
    """The GPU-arch query answers an A800's SM80 (test only: this machine has no GPU)."""
    from types import SimpleNamespace

    import torch

    sm80 = SimpleNamespace(major=8, minor=0, name="NVIDIA A800-SXM4-80GB", total_memory=80 << 30)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *_a, **_k: (8, 0))
    # Megatron's get_device_arch_version (megatron/training/utils.py:449 at 1dcf0daf) asks this one.
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *_a, **_k: sm80)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)


@pytest.mark.parametrize("nnodes", [1, 2])
def test_slimes_parse_args_takes_the_plans_argv(tmp_path, monkeypatch, sm80, nnodes):
    from slime.utils.arguments import parse_args

    cfg, argv = plan_argv(tmp_path, nnodes)
    # The job's environment as the driver submits it (CUDA_DEVICE_MAX_CONNECTIONS, which Megatron
    # requires under tensor parallelism): slime_args.runtime_env.
    from pyhelpers.launch.slime_args import runtime_env

    for name, value in runtime_env(cfg)["env_vars"].items():
        if name != "PYTHONPATH":
            monkeypatch.setenv(name, value)
    print(f"NNODES={nnodes}: train.py {' '.join(argv)}")
    monkeypatch.setattr(sys, "argv", ["train.py", *argv])
    args = parse_args()
    assert args.actor_num_nodes == nnodes
    assert args.rollout_function_path == plugin.ROLLOUT_FUNCTION
    assert args.custom_generate_function_path == plugin.GENERATE_FUNCTION
    assert args.dynamic_sampling_filter_path == plugin.DYNAMIC_FILTER
    assert args.custom_reward_post_process_path == plugin.REWARD_POST_PROCESS
    assert (args.input_key, args.label_key) == (plugin.INPUT_KEY, plugin.LABEL_KEY)


@pytest.mark.parametrize("path", [plugin.ROLLOUT_FUNCTION, plugin.GENERATE_FUNCTION, plugin.DYNAMIC_FILTER,
                                  plugin.REWARD_POST_PROCESS])
def test_slimes_load_function_finds_every_plugin_path(path):
    from slime.utils.misc import load_function

    fn = load_function(path)
    assert callable(fn) and f"{fn.__module__}.{fn.__name__}" == path


@pytest.mark.parametrize("evaluation", [False, True])
def test_the_plugins_rollout_signature_fits_slimes_call_site(evaluation):
    """slime calls the rollout function through call_rollout_fn (slime/rollout/base_types.py:19-20,
    from slime/ray/rollout.py:504-592): the plugin's real signature must take that call. The body is
    not run here (it needs engines): a probe with the plugin's signature binds the call as the
    plugin would, so a renamed parameter fails inside slime's call site."""
    import inspect

    from slime.rollout.base_types import RolloutFnTrainOutput, call_rollout_fn
    from slime.utils.misc import load_function

    signature = inspect.signature(load_function(plugin.ROLLOUT_FUNCTION))

    def plugin_signature(*args, **kwargs):
        signature.bind(*args, **kwargs)  # the TypeError the plugin itself would raise
        return RolloutFnTrainOutput(samples=[])

    out = call_rollout_fn(plugin_signature, object(), 0, object(), evaluation=evaluation)
    assert out is not None
