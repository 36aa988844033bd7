"""run.json comparison and the command lines the driver launches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT

from pyhelpers.config import ray_ports
from pyhelpers.config.load import load
from pyhelpers.errors import ToolkitError
from pyhelpers.launch import pinned_flag_lists, ray_start, sglang_server, slime_args, slime_flags
from pyhelpers.overview import manifest
from pyhelpers.run.layout import from_config


def test_manifest_has_no_secrets_or_machine_paths(toolkit_env, tmp_path):
    (tmp_path / ".env").write_text("WANDB_API_KEY=wk-SECRET-1\n")
    cfg = load()
    m = manifest.build(cfg)
    text = repr(m)
    assert "wk-SECRET-1" not in text and str(tmp_path) not in text
    assert "WANDB_API_KEY" not in m["config"] and "TRAIN_SAVE" not in m["config"]


def test_dangerous_change_is_refused_naming_it_and_harmless_is_recorded(toolkit_env, tmp_path):
    path = tmp_path / "run.json"
    manifest.record_or_compare(load(), path)
    with pytest.raises(ToolkitError, match=r"TP_SIZE: '2' -> '1'.*GLOBAL_BATCH_SIZE|GLOBAL_BATCH_SIZE.*TP_SIZE"):
        manifest.record_or_compare(load({**toolkit_env, "TP_SIZE": "1", "GLOBAL_BATCH_SIZE": "32"}), path)
    allowed = manifest.record_or_compare(load({**toolkit_env, "ROUNDS": "7", "EVAL_CONCURRENCY": "16"}),
                                            path)
    assert allowed == ["EVAL_CONCURRENCY: '32' -> '16'", "ROUNDS: '5' -> '7'"]
    assert "ROUNDS: '5' -> '7'" in path.read_text()


def test_model_content_change_is_refused(toolkit_env, tmp_path):
    hf = tmp_path / "models" / "Qwen3.5-4B"
    hf.mkdir(parents=True)
    (hf / "config.json").write_text('{"a": 1}')
    env = {**toolkit_env, "MODELS_DIR": str(tmp_path / "models")}
    path = tmp_path / "run.json"
    manifest.record_or_compare(load(env), path)
    (hf / "config.json").write_text('{"a": 2}')
    with pytest.raises(ToolkitError, match="hf_config content changed"):
        manifest.record_or_compare(load(env), path)


def _slime_argv(env):
    cfg = load(env)
    return slime_args.slime_train(cfg, from_config(cfg), 1, [])


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
    """A flag list of the pinned versions (env/flags/README.md says where each comes from)."""
    return {line.strip() for line in (ROOT / "env" / "flags" / name).read_text().splitlines()
            if line.startswith("--")}


def test_emitted_flags_exist_in_the_pinned_versions():
    assert slime_flags.SLIME_TRAIN_FLAGS - _reference("slime_train_flags.txt") == set()
    assert slime_flags.SGLANG_SERVER_FLAGS - _reference("sglang_server_flags.txt") == set()


def test_ray_head_binds_dashboard_to_loopback(toolkit_env):
    argv = ray_start.ray_head(load())
    assert argv[argv.index("--dashboard-host") + 1] == "127.0.0.1"
    assert "0.0.0.0" not in argv


def test_ray_head_sets_every_port_with_flags_ray_start_knows(toolkit_env):
    from ray.scripts.scripts import start  # the installed ray 2.60's own `ray start` command

    cfg = load({**toolkit_env, "RAY_PORT": "23000", "RAY_DASHBOARD_PORT": "23100"})
    argv = ray_start.ray_head(cfg)
    known = {opt for p in start.params for opt in p.opts}
    assert [a for a in argv[2:] if a.startswith("--") and a not in known] == []
    port_flags = {o for o in known if o.endswith("-port")} - {"--redis-shard-ports"}
    given = {a: argv[i + 1] for i, a in enumerate(argv) if a in port_flags}
    assert set(given) == port_flags  # none left to Ray's defaults
    assert given["--port"] == "23000" and given["--dashboard-port"] == "23100"
    assert given["--min-worker-port"] == given["--max-worker-port"] == "0"  # kernel-chosen
    assert sorted(int(v) for k, v in given.items() if k not in ("--dashboard-port", "--min-worker-port",
                                                               "--max-worker-port")) == list(range(23000, 23008))
    assert ray_ports.env(cfg) == {"AUTOSCALER_METRIC_PORT": "23008", "DASHBOARD_METRIC_PORT": "23009",
                                  "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def test_runtime_env_has_no_secret(toolkit_env, tmp_path):
    (tmp_path / ".env").write_text("WANDB_API_KEY=wk-SECRET-2\n")
    assert "wk-SECRET-2" not in json.dumps(slime_args.runtime_env(load()))


def test_eval_server_is_tp1_dp_all_gpus(toolkit_env):
    argv = sglang_server.eval_server(load(), "/m/hf")
    assert argv[:3] == ["python3", "-m", "sglang.launch_server"]
    assert argv[argv.index("--tp-size") + 1] == "1" and argv[argv.index("--dp-size") + 1] == "4"


def test_the_committed_flag_lists_hold_no_flag_that_takes_a_secret():
    """A flag that carries a key puts it in `ps` and in W&B's run config: the toolkit never emits one
    (slime_flags.FORBIDDEN), the lists leave them out, so the stand-ins refuse them too."""
    for name in ("slime_train_flags.txt", "sglang_server_flags.txt"):
        flags = [x for x in (ROOT / "env" / "flags" / name).read_text().splitlines() if x.startswith("--")]
        assert [f for f in flags if pinned_flag_lists.takes_secret(f)] == [], name
    assert all(pinned_flag_lists.takes_secret(f) for f in slime_flags.FORBIDDEN)


def test_flag_lists_are_read_from_the_sources_as_their_parsers_build_them(tmp_path):
    server_args = '''
class ServerArgs:
    model_path: A[str, Arg(help="weights", aliases=["--model"])] = None
    tp_size: A[int, "tensor parallel size"] = 1
    fp8_gemm_runner_backend: A[str, Arg(cli_name="--fp8-gemm-backend")] = "auto"
    uses_mamba: A[bool, Arg(help="derived", no_cli=True)] = False
    stat_loggers: Optional[dict] = None

    @staticmethod
    def add_cli_args(parser):
        add_cli_args_from_dataclass(parser, ServerArgs)
        parser.add_argument("--config", type=str)
'''
    assert pinned_flag_lists.sglang_flags(server_args) == {"--model-path", "--model", "--tp-size", "--fp8-gemm-backend", "--config"}
    (tmp_path / "slime" / "slime" / "utils").mkdir(parents=True)
    (tmp_path / "slime" / "slime" / "utils" / "arguments.py").write_text(
        'parser.add_argument("--rollout-batch-size", type=int)\nreset_arg(parser, "--custom-config-path")\n'
        'print("--not-a-flag")\n')
    (tmp_path / "meg" / "megatron" / "training").mkdir(parents=True)
    (tmp_path / "meg" / "megatron" / "training" / "arguments.py").write_text(
        'group.add_argument("--save-interval", type=int)\n'
        'factory = ArgumentGroupFactory(TransformerConfig, exclude=["hidden_size"])\n')
    (tmp_path / "meg" / "megatron" / "core.py").write_text(
        "class ModelParallelConfig:\n    sequence_parallel: bool = False\n"
        "class TransformerConfig(ModelParallelConfig):\n    hidden_size: int = 0\n"
        '    fp8: str = field(default=None, metadata={"argparse_meta": {"arg_names": ["--fp8-format"]}})\n')
    got = pinned_flag_lists.slime_flags(tmp_path / "slime", tmp_path / "meg", {"--tp-size"})
    assert got == {"--rollout-batch-size", "--custom-config-path", "--save-interval", "--sequence-parallel",
                   "--no-sequence-parallel", "--disable-sequence-parallel", "--fp8", "--no-fp8", "--disable-fp8",
                   "--fp8-format", "--sglang-tp-size"}


def test_the_flag_lists_say_which_versions_they_were_read_from():
    heads = {name: (ROOT / "env" / "flags" / name).read_text().split("\n--", 1)[0]
             for name in ("sglang_server_flags.txt", "slime_train_flags.txt")}
    assert "sglang==0.5.15.post1" in heads["sglang_server_flags.txt"]
    assert "slime 624b824" in heads["slime_train_flags.txt"] and "Megatron-LM 1dcf0daf" in heads["slime_train_flags.txt"]


@pytest.mark.parametrize("link, environ, want", [
    ("NV8", {}, "1"),          # NVLink between the GPUs: as slime's run scripts (scripts/run-qwen3-4B.sh:18-24)
    ("SYS", {}, "0"),          # PCIe only
    ("NV8", {"NCCL_NVLS_ENABLE": "0"}, "0"),  # a host that forbids NVLink multicast keeps its setting
])
def test_runtime_env_sets_nccl_nvls_from_the_gpu_topology(toolkit_env, monkeypatch, link, environ, want):
    from conftest import FAKES

    monkeypatch.setenv("NVIDIA_SMI", str(FAKES / "bin" / "nvidia-smi"))
    monkeypatch.setenv("FAKE_GPU_LINK", link)
    monkeypatch.delenv("NCCL_NVLS_ENABLE", raising=False)
    for k, v in environ.items():
        monkeypatch.setenv(k, v)
    assert slime_args.runtime_env(load())["env_vars"]["NCCL_NVLS_ENABLE"] == want


def test_slime_saves_once_per_round_because_the_rollout_count_is_given(toolkit_env):
    """slime 624b824 also saves at every pass over the training data, but only when --num-epoch sets
    the rollout count: with --num-rollout, num_rollout_per_epoch stays None (slime/ray/placement_group.py
    :239-243) and should_run_periodic_action saves at --save-interval and the last rollout only
    (slime/utils/misc.py:107-128). The disk plan counts one checkpoint per round on that."""
    from pyhelpers.run.layout import RunLayout

    cfg = load(toolkit_env)
    lay = RunLayout(Path(toolkit_env["RUNS_DIR"]) / "r", Path(toolkit_env["RUNS_DIR"]) / "s",
                    cfg.int("STEPS_PER_ROUND"))
    argv = slime_args.slime_train(cfg, lay, 1, [])
    assert "--num-epoch" not in argv and argv[argv.index("--num-rollout") + 1] == str(2 * cfg.int("STEPS_PER_ROUND"))
    assert argv[argv.index("--save-interval") + 1] == cfg["STEPS_PER_ROUND"]


def test_the_slime_stand_in_refuses_to_count_rollouts_by_epoch(tmp_path):
    """The stand-in saves by slime's rule for --num-rollout; --num-epoch (per-epoch saves) is not
    modelled, so it is refused rather than run with another save schedule."""
    import subprocess
    import sys

    from conftest import FAKES

    train = FAKES / "slime_stub" / "train.py"
    res = subprocess.run([sys.executable, str(train), "--num-epoch", "2", "--save-interval", "2",
                          "--rollout-batch-size", "4"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "misc.py:127-128" in res.stderr, res.stderr[-2000:]
    res = subprocess.run([sys.executable, str(train), "--save-interval", "2"], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode != 0 and "num_epoch is not set, but num_rollout is not set" in res.stderr, res.stderr[-2000:]
