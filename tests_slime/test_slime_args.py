"""slime's real parse_args and load_function on what the toolkit passes (issue 42): the exact argv
`make plan` shows for train.py (MODEL_ARGS of slime's own scripts/models/qwen3.5-4B.sh first), on
one node and on two, and every custom function path of the plugin's flags."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pyhelpers.rollout import flags as plugin


def _plan_argv(tmp_path: Path, nnodes: int):
    """train.py's flags as `make plan` builds them (the doctor's flag check builds the same list)."""
    from support.tokenizer import build_tokenizer  # Qwen3.5-4B's config.json, which slime validates against

    from pyhelpers.config import load as config
    from pyhelpers.doctor.base import Context
    from pyhelpers.doctor.flags import plan_argvs

    hf = build_tokenizer(tmp_path / "models" / "Qwen3.5-4B")
    env_file = tmp_path / ".env"
    env_file.write_text("")
    env = {"SHOPSIMRL_ENV_FILE": str(env_file), "RUNS_DIR": str(tmp_path / "runs"), "TRAIN_SAVE": str(tmp_path / "save"),
           "DATA_DISK": str(tmp_path), "SYSTEM_DISK": "/dev/shm", "NNODES": str(nnodes), "HF_MODEL": str(hf),
           "SLIME_DIR": os.environ["SHOPSIMRL_SLIME_DIR"],
           "MEGATRON_DIR": os.environ["SHOPSIMRL_MEGATRON_PATH"], "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    cfg = config.load(env)
    # Round 0's plugin configuration, as the train stage writes it before the job starts
    # (pyhelpers/stages/train.py): slime reads it in parse_args (--custom-config-path).
    from pyhelpers.rollout.settings import plugin_values, write_plugin_yaml
    from pyhelpers.run.layout import from_config

    lay = from_config(cfg)
    lay.plugin_config(0).parent.mkdir(parents=True, exist_ok=True)
    write_plugin_yaml(lay.plugin_config(0), **plugin_values(cfg, lay, 0))
    return cfg, plan_argvs(Context(cfg, env, cfg.DOCTOR_PROFILE))[0]


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

    cfg, argv = _plan_argv(tmp_path, nnodes)
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
