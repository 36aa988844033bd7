"""run.json comparison and the command lines the driver launches."""

from __future__ import annotations

import json

import pytest
from conftest import SHARED

from pyhelpers.config import load as config
from pyhelpers.errors import ToolkitError
from pyhelpers.launch import slime_args as launch_args
from pyhelpers.launch import slime_flags
from pyhelpers.run import manifest as runmanifest
from pyhelpers.run.layout import from_config


def test_manifest_has_no_secrets_or_machine_paths(toolkit_env, tmp_path):
    (tmp_path / ".env").write_text("WANDB_API_KEY=wk-SECRET-1\n")
    cfg = config.load()
    m = runmanifest.build(cfg)
    text = repr(m)
    assert "wk-SECRET-1" not in text and str(tmp_path) not in text
    assert "WANDB_API_KEY" not in m["config"] and "TRAIN_SAVE" not in m["config"]


def test_dangerous_change_is_refused_naming_it_and_harmless_is_recorded(toolkit_env, tmp_path):
    path = tmp_path / "run.json"
    runmanifest.record_or_compare(config.load(), path)
    with pytest.raises(ToolkitError, match=r"TP_SIZE: '2' -> '1'.*GLOBAL_BATCH_SIZE|GLOBAL_BATCH_SIZE.*TP_SIZE"):
        runmanifest.record_or_compare(config.load({**toolkit_env, "TP_SIZE": "1", "GLOBAL_BATCH_SIZE": "32"}), path)
    allowed = runmanifest.record_or_compare(config.load({**toolkit_env, "ROUNDS": "7", "EVAL_CONCURRENCY": "16"}),
                                            path)
    assert allowed == ["EVAL_CONCURRENCY: '32' -> '16'", "ROUNDS: '5' -> '7'"]
    assert "ROUNDS: '5' -> '7'" in path.read_text()


def test_model_content_change_is_refused(toolkit_env, tmp_path):
    hf = tmp_path / "models" / "Qwen3.5-4B"
    hf.mkdir(parents=True)
    (hf / "config.json").write_text('{"a": 1}')
    env = {**toolkit_env, "MODELS_DIR": str(tmp_path / "models")}
    path = tmp_path / "run.json"
    runmanifest.record_or_compare(config.load(env), path)
    (hf / "config.json").write_text('{"a": 2}')
    with pytest.raises(ToolkitError, match="hf_config content changed"):
        runmanifest.record_or_compare(config.load(env), path)


def _slime_argv(env):
    cfg = config.load(env)
    return launch_args.slime_train(cfg, from_config(cfg), 1, [])


def test_slime_command_carries_the_memo_settings(toolkit_env):
    argv = _slime_argv(toolkit_env)
    joined = " ".join(argv)
    for piece in ("--rollout-batch-size 16", "--n-samples-per-prompt 8", "--over-sampling-batch-size 32",
                  "--global-batch-size 64", "--tensor-model-parallel-size 2", "--max-tokens-per-gpu 16384",
                  "--rollout-max-response-len 4096", "--rollout-max-context-len 24576", "--num-rollout 40",
                  "--save-interval 20", "--no-save-optim --no-load-optim", "--wandb-group qwen35-4b-train-100"):
        assert piece in joined, piece
    assert argv[argv.index("--load") + 1] == argv[argv.index("--save") + 1]
    assert "--wandb-key" not in joined


def test_save_optim_keeps_optimizer_state(toolkit_env):
    assert "--no-save-optim" not in _slime_argv({**toolkit_env, "SAVE_OPTIM": "1"})


def test_unknown_and_forbidden_flags_are_refused():
    with pytest.raises(ToolkitError, match="--rollout-batch-sise is not in the toolkit's checked flag list"):
        slime_flags.check(["--rollout-batch-sise", "4"], slime_flags.SLIME_TRAIN_FLAGS, "slime")
    with pytest.raises(ToolkitError, match="expose a secret"):
        slime_flags.check(["--wandb-key", "x"], slime_flags.SLIME_TRAIN_FLAGS | {"--wandb-key"}, "slime")


def _reference(name):
    path = SHARED / "reference" / "flags" / name
    if not path.is_file():
        pytest.fail(f"reference flag list missing: {path} (CI has ../shared beside the clone)")
    return {line.strip() for line in path.read_text().splitlines() if line.startswith("--")}


def test_emitted_flags_exist_in_the_pinned_versions():
    assert slime_flags.SLIME_TRAIN_FLAGS - _reference("slime_train_flags.txt") == set()
    assert slime_flags.SGLANG_SERVER_FLAGS - _reference("sglang_server_flags.txt") == set()


def test_ray_head_binds_dashboard_to_loopback(toolkit_env):
    argv = launch_args.ray_head(config.load())
    assert argv[argv.index("--dashboard-host") + 1] == "127.0.0.1"
    assert "0.0.0.0" not in argv


def test_runtime_env_has_no_secret(toolkit_env, tmp_path):
    (tmp_path / ".env").write_text("WANDB_API_KEY=wk-SECRET-2\n")
    assert "wk-SECRET-2" not in json.dumps(launch_args.runtime_env(config.load()))


def test_eval_server_is_tp1_dp_all_gpus(toolkit_env):
    argv = launch_args.eval_server(config.load(), "/m/hf")
    assert argv[:3] == ["python3", "-m", "sglang.launch_server"]
    assert argv[argv.index("--tp-size") + 1] == "1" and argv[argv.index("--dp-size") + 1] == "4"
