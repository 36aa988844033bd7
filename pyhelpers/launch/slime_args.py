"""slime's command lines, built from the configuration: train.py's flags (checked against
pyhelpers.launch.slime_flags), the Ray job's entrypoint and runtime env, slime's tools. The other
programs' command lines: ray_start.py (Ray), shopsim_server.py (ShopSimulator), sglang_server.py
(the SGLang eval server). No secret is ever placed on a command line: the W&B key reaches slime's
processes through a 0600 file (pyhelpers/launch/secret_env.py).
"""

from __future__ import annotations

import os
import shlex

from pyhelpers.config import jit_caches
from pyhelpers.config.load import Config
from pyhelpers.launch import gpu_topology, node_env, slime_flags
from pyhelpers.rollout import flags
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


def slime_train(cfg: Config, lay: RunLayout, r: int, plugin_flags: list[str], one_job: bool = False) -> list[str]:
    """slime train.py flags for round r (the model-args script's MODEL_ARGS come first, added by
    bin/ from slime's own scripts/models/qwen3.5-4B.sh). NNODES nodes of NUM_GPUS GPUs each:
    --num-gpus-per-node is slime's engine layout per node (default 8, wrong on 4-GPU nodes);
    under --colocate slime puts the rollout engines on all NNODES x NUM_GPUS GPUs itself
    (slime 624b824 slime/utils/arguments.py:1922-1923).

    one_job: the one-job mode's job (docs/one-job-mode.md), from round r to the run's last:
    --num-rollout ROUNDS x STEPS_PER_ROUND (a multiple of --eval-interval, so slime evaluates the
    last round too: train.py:90 does not force it), its eval flags in plugin_flags, and no
    --save-hf: each round's HF export is converted on the CPU while the next round trains, not
    written from the GPUs inside the save (actor.py:589-590)."""
    gpus = str(cfg.NUM_GPUS)
    megatron = str(lay.megatron)
    argv = [
        "--actor-num-nodes", str(cfg.NNODES), "--actor-num-gpus-per-node", gpus, "--num-gpus-per-node", gpus,
        "--colocate", "--rollout-num-gpus-per-engine", "1",
        "--tensor-model-parallel-size", str(cfg.TP_SIZE), "--sequence-parallel",
        "--hf-checkpoint", str(cfg.HF_MODEL), "--ref-load", str(cfg.TORCH_DIST_MODEL),
        "--load", megatron, "--save", megatron, "--save-interval", str(cfg.STEPS_PER_ROUND),
        "--prompt-data", str(cfg.TRAIN_TASKS),
        "--num-rollout", str(lay.num_rollout(cfg.ROUNDS - 1 if one_job else r)), "--rollout-shuffle",
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
    if cfg.SAVE_HF and not one_job:  # HF weights written from the GPUs at the round's final save (architecture §7)
        argv += ["--save-hf", lay.hf_dir_template]
    if not cfg.SAVE_OPTIM:
        argv += ["--no-save-optim", "--no-load-optim"]
    if cfg.WANDB_MODE != "disabled":
        argv += ["--use-wandb", "--wandb-project", cfg.WANDB_PROJECT, "--wandb-group", cfg.WANDB_GROUP,
                 "--wandb-dir", str(lay.wandb_dir), "--disable-wandb-random-suffix"]
    return slime_flags.check(argv, slime_flags.SLIME_TRAIN_FLAGS, "slime train.py")


def job_flags(cfg: Config, lay: RunLayout, r: int, one_job: bool = False) -> list[str]:
    """train.py's flags for round r's job with the rollout plugin's (MODEL_ARGS not included);
    one_job: the one-job mode's job from round r on, evaluating in the job (docs/one-job-mode.md;
    ONE_JOB=1 submits it, `make plan` shows it in either mode)."""
    extra = flags.in_job_eval_flags(cfg.STEPS_PER_ROUND, str(cfg.VAL_TASKS)) if one_job else []
    return slime_train(cfg, lay, r=r, plugin_flags=[*flags.plugin_flags(), *extra], one_job=one_job)


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
