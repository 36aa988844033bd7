"""Command lines of every program the driver launches, built from the configuration.

One builder per program; each checks its flags against pyhelpers.launch.slime_flags. No secret is ever
placed on a command line: the W&B key reaches slime's processes through a 0600 file
(pyhelpers/launch/secret_env.py).
"""

from __future__ import annotations

import math
import os
import shlex

from pyhelpers.config import jit_caches, ray_ports
from pyhelpers.config.load import Config
from pyhelpers.launch import gpu_topology, node_env, slime_flags
from pyhelpers.run.layout import RunLayout

# GRPO settings (docs/training.md says why): no KL term (as the ShopSimulator paper's RL), clip-higher.
ALGORITHM = [
    "--advantage-estimator", "grpo", "--kl-coef", "0.0", "--entropy-coef", "0.0",
    "--eps-clip", "0.2", "--eps-clip-high", "0.28",
    "--optimizer", "adam", "--lr", "1e-6", "--lr-decay-style", "constant", "--weight-decay", "0.1",
    "--adam-beta1", "0.9", "--adam-beta2", "0.98",
    "--attention-dropout", "0.0", "--hidden-dropout", "0.0",
    "--accumulate-allreduce-grads-in-fp32", "--attention-softmax-in-fp32",
    # Full activation recompute: the memory plan (pyhelpers/capacity/gpumem.py, docs/oom_qwen35_4b.md)
    # assumes it; without it the 24k-token micro-batch does not fit at TP=2.
    "--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1",
]


def slime_train(cfg: Config, lay: RunLayout, r: int, plugin_flags: list[str]) -> list[str]:
    """slime train.py flags for round r (the model-args script's MODEL_ARGS come first, added by
    bin/ from slime's own scripts/models/qwen3.5-4B.sh). NNODES nodes of NUM_GPUS GPUs each:
    --num-gpus-per-node is slime's engine layout per node (default 8, wrong on 4-GPU nodes);
    under --colocate slime puts the rollout engines on all NNODES x NUM_GPUS GPUs itself
    (slime 624b824 slime/utils/arguments.py:1922-1923)."""
    gpus = str(cfg.NUM_GPUS)
    megatron = str(lay.megatron)
    argv = [
        "--actor-num-nodes", str(cfg.NNODES), "--actor-num-gpus-per-node", gpus, "--num-gpus-per-node", gpus,
        "--colocate", "--rollout-num-gpus-per-engine", "1",
        "--tensor-model-parallel-size", str(cfg.TP_SIZE), "--sequence-parallel",
        "--hf-checkpoint", str(cfg.HF_MODEL), "--ref-load", str(cfg.TORCH_DIST_MODEL),
        "--load", megatron, "--save", megatron, "--save-interval", str(cfg.STEPS_PER_ROUND),
        "--prompt-data", str(cfg.TRAIN_TASKS),
        "--num-rollout", str(lay.num_rollout(r)), "--rollout-shuffle",
        "--rollout-batch-size", str(cfg.ROLLOUT_GROUPS), "--n-samples-per-prompt", str(cfg.SAMPLES_PER_GROUP),
        "--over-sampling-batch-size", str(cfg.OVER_SAMPLING_GROUPS),
        "--global-batch-size", str(cfg.GLOBAL_BATCH_SIZE),
        "--max-tokens-per-gpu", str(cfg.MAX_TOKENS_PER_GPU), "--use-dynamic-batch-size",
        "--rollout-max-response-len", str(cfg.ROLLOUT_MAX_RESPONSE_LEN),
        "--rollout-max-context-len", str(cfg.ROLLOUT_MAX_CONTEXT_LEN),
        "--sglang-context-length", str(cfg.ROLLOUT_MAX_CONTEXT_LEN),
        "--rollout-temperature", "1.0", "--sglang-mem-fraction-static", "0.7",
        *ALGORITHM,
        "--skip-eval-before-train",
        "--custom-config-path", str(lay.plugin_config(r)),
        *plugin_flags,
    ]
    if cfg.SAVE_HF:  # HF weights written from the GPUs at the round's final save (architecture §7)
        argv += ["--save-hf", lay.hf_dir_template]
    if not cfg.SAVE_OPTIM:
        argv += ["--no-save-optim", "--no-load-optim"]
    if cfg.WANDB_MODE != "disabled":
        argv += ["--use-wandb", "--wandb-project", cfg.WANDB_PROJECT, "--wandb-group", cfg.WANDB_GROUP,
                 "--wandb-dir", str(lay.wandb_dir), "--disable-wandb-random-suffix"]
    return slime_flags.check(argv, slime_flags.SLIME_TRAIN_FLAGS, "slime train.py")


def runtime_env(cfg: Config, key_files: dict[str, str] | None = None) -> dict:
    """The job's runtime env: import paths, slime's NCCL setting and key_files (NETRC: the path of
    the job's W&B netrc, secret_env.job_netrc), never a secret -- Ray stores it in its GCS and shows
    it in the job's info; the Ray head and so the job inherit no secret either. It is the same on
    every node, so it never holds a per-node value (SLIME_HOST_IP, the socket interfaces: each
    raylet's own, node_env.py); on a multi-node run it empties every proxy variable."""
    pythonpath = ":".join([str(cfg.MEGATRON_DIR), str(cfg.root), str(cfg.SLIME_DIR)])
    return {"env_vars": {"PYTHONPATH": pythonpath, "CUDA_DEVICE_MAX_CONNECTIONS": "1",
                         "NCCL_NVLS_ENABLE": gpu_topology.nvls_enable(cfg.NVIDIA_SMI, os.environ),
                         **jit_caches.env(cfg),  # Megatron's and the engines' kernels: config/jit_caches.py
                         **(node_env.job_env_vars() if cfg.multinode else {}),
                         **(key_files or {})}}


def slime_entrypoint(cfg: Config, model_args: list[str], slime_args: list[str]) -> str:
    """The job's entrypoint, a shell command line as Ray runs it: `python3 train.py MODEL_ARGS flags`.
    python3 is the slime env's (the Ray head runs activated). MODEL_ARGS come from slime's own
    model script (MODEL_ARGS_SCRIPT), not from this toolkit, so they are passed as they are."""
    return shlex.join(["python3", str(cfg.SLIME_TRAIN), *model_args, *slime_args])


def slime_tool(cfg: Config, script_knob: str, *args: str) -> list[str]:
    """One of slime's tools (the converters) in the slime env, with Megatron importable."""
    return [str(cfg.root / "bin" / "in-env"), cfg.SLIME_ENV, "env", f"PYTHONPATH={cfg.MEGATRON_DIR}",
            "python3", str(cfg.path(script_knob)), *args]


def head_node_addr(cfg: Config) -> str:
    """The address the head's Ray node binds, its GCS included (docs/multinode.md §4)."""
    return cfg.NODE_ADDR if cfg.multinode else "127.0.0.1"


def ray_head(cfg: Config) -> list[str]:
    """`ray start` for a head in the foreground (--block) on loopback, every port from the
    configuration (pyhelpers/config/ray_ports.py; its environment: services.py)."""
    node = head_node_addr(cfg)
    return ["ray", "start", "--head", "--block", "--node-ip-address", node, "--dashboard-host", "127.0.0.1",
            *ray_ports.flags(cfg), "--num-gpus", str(cfg.NUM_GPUS), "--temp-dir", cfg.ray_temp_dir,
            "--disable-usage-stats"]


def ray_start_env(cfg: Config) -> dict[str, str]:
    """What `ray start` gets in its environment on the head and on each worker beside its ports:
    RAY_START_TIMEOUT for its new raylet to register with the GCS. Ray 2.60.0's own wait is 30 s
    (ray/_private/node.py:424-444 raises when a call to the GCS for the new node ends after it), and
    that call waits RAY_raylet_start_wait_time_s for the node, which Ray's error names as the setting
    to raise ('Try increase the RAY_raylet_start_wait_time_s config'): at load 25 on 2 cores a worker
    missed 30 s three times in a row."""
    return {"RAY_raylet_start_wait_time_s": str(math.ceil(cfg.RAY_START_TIMEOUT))}  # Ray reads a whole number


def ray_worker(cfg: Config) -> list[str]:
    """`ray start` for a worker node in the foreground (make join, docs/multinode.md §5): it joins the
    head at HEAD_ADDR:RAY_PORT, binds NODE_ADDR, takes the run's port block above the head-only ports
    and NUM_GPUS GPUs (its environment: launch/cluster.py)."""
    return ["ray", "start", "--block", "--address", f"{cfg.HEAD_ADDR}:{cfg.RAY_PORT}",
            "--node-ip-address", cfg.NODE_ADDR, *ray_ports.worker_flags(cfg), "--num-gpus", str(cfg.NUM_GPUS),
            "--temp-dir", cfg.ray_temp_dir, "--disable-usage-stats"]


def eval_server(cfg: Config, model_path: str) -> list[str]:
    """The SGLang eval server on the round's HF export: TP=1, DP=NUM_GPUS (M9), loopback only."""
    argv = ["--model-path", model_path, "--tp-size", "1", "--dp-size", str(cfg.NUM_GPUS),
            "--host", "127.0.0.1", "--port", str(cfg.EVAL_PORT), "--context-length", str(cfg.ROLLOUT_MAX_CONTEXT_LEN)]
    slime_flags.check(argv, slime_flags.SGLANG_SERVER_FLAGS, "sglang.launch_server")
    return [*shlex.split(cfg.SGLANG_LAUNCHER), *argv]


def shopsim(cfg: Config) -> list[str]:
    """ShopSimulator through a launcher that fixes pool size, port, host, seed and reset retries
    before the envs are built (M6): SHOPSIM_LAUNCHER, or the project's own launcher."""
    # A launcher of the user's own reads the retries from its environment (launch/services.py);
    # the project's takes them on its command line.
    launcher = shlex.split(cfg.SHOPSIM_LAUNCHER) if cfg.SHOPSIM_LAUNCHER else [
        "python3", str(cfg.root / "pyhelpers" / "shopsim" / "launcher.py"), "--shopsim-dir", str(cfg.SHOPSIM_DIR),
        "--reset-retries", str(cfg.SHOPSIM_RESET_RETRIES), "--reset-delay", f"{cfg.SHOPSIM_RESET_DELAY:g}"]
    return [*launcher, "--host", cfg.SHOPSIM_HOST, "--port", str(cfg.SHOPSIM_PORT),
            "--slots", str(cfg.SHOPSIM_SLOTS), "--seed", str(cfg.SHOPSIM_SEED)]
