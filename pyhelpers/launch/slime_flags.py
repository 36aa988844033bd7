"""Every slime / Megatron / SGLang flag the toolkit may emit, and nothing else.

slime's parser silently ignores unknown flags (Megatron's ignore_unknown_args=True), so a typo
never errors: the command builders refuse any flag not listed here, and a test checks this list
against the flag lists of the pinned versions (env/flags/, README.md there says how they are made;
pinned_flag_lists.py writes them).

Checked against: slime v0.3.1 (commit 624b824), Megatron-LM 1dcf0daf (slime's pin),
SGLang 0.5.15.post1.
"""

from __future__ import annotations

from pyhelpers.errors import ToolkitError

CHECKED_AGAINST = "slime v0.3.1 (624b824) / Megatron-LM 1dcf0daf / SGLang 0.5.15.post1"

# slime train.py (slime's own, Megatron's, and SGLang's with the --sglang- prefix).
SLIME_TRAIN_FLAGS = frozenset({
    # placement and parallelism (M1, M7)
    "--actor-num-nodes", "--actor-num-gpus-per-node", "--num-gpus-per-node", "--colocate",
    "--rollout-num-gpus-per-engine", "--tensor-model-parallel-size", "--sequence-parallel",
    # model and checkpoints (M12, architecture §7)
    "--hf-checkpoint", "--ref-load", "--load", "--save", "--save-interval", "--save-hf",
    "--no-save-optim", "--no-load-optim",
    # data and rounds
    "--prompt-data", "--input-key", "--label-key", "--metadata-key", "--rollout-shuffle", "--num-rollout",
    # batch (M10)
    "--rollout-batch-size", "--n-samples-per-prompt", "--over-sampling-batch-size",
    "--dynamic-sampling-filter-path", "--global-batch-size",
    # lengths (M15)
    "--max-tokens-per-gpu", "--use-dynamic-batch-size", "--rollout-max-response-len",
    "--rollout-max-context-len", "--sglang-context-length", "--rollout-temperature",
    # algorithm (docs/training.md)
    "--advantage-estimator", "--kl-coef", "--entropy-coef", "--eps-clip", "--eps-clip-high",
    "--optimizer", "--lr", "--lr-decay-style", "--weight-decay", "--adam-beta1", "--adam-beta2",
    "--attention-dropout", "--hidden-dropout", "--accumulate-allreduce-grads-in-fp32",
    "--attention-softmax-in-fp32", "--log-probs-chunk-size", "--recompute-loss-function",
    "--recompute-granularity", "--recompute-method", "--recompute-num-layers",
    # engines
    "--sglang-mem-fraction-static",
    # plugin hooks (the rollout plugin publishes which it needs)
    "--custom-config-path", "--custom-generate-function-path", "--rollout-function-path",
    "--custom-rm-path", "--custom-rollout-log-function-path", "--custom-reward-post-process-path",
    # eval is the toolkit's own: val/gate after each round, on the eval server (today's order) or in
    # the job through the plugin's eval hook (the one-job mode, docs/one-job-mode.md)
    "--skip-eval-before-train", "--eval-interval", "--eval-prompt-data", "--eval-function-path",
    # W&B (M17): never --wandb-key
    "--use-wandb", "--wandb-project", "--wandb-group", "--wandb-dir", "--disable-wandb-random-suffix",
})

# python -m sglang.launch_server (the eval server, M9).
SGLANG_SERVER_FLAGS = frozenset({
    "--model-path", "--tp-size", "--dp-size", "--host", "--port", "--context-length",
    "--mem-fraction-static", "--random-seed", "--log-level",
})

# Never emitted whatever the caller asks: they put secrets on argv (and into W&B's run config).
FORBIDDEN = frozenset({"--wandb-key", "--api-key"})


def check(argv: list[str], allowed: frozenset[str], program: str) -> list[str]:
    """Refuse any flag not in `allowed` (or forbidden); return argv unchanged."""
    for arg in argv:
        if not arg.startswith("--"):
            continue
        name = arg.split("=", 1)[0]
        if name in FORBIDDEN:
            raise ToolkitError(f"refusing to put {name} on the {program} command line (it would expose a secret)",
                               name, "pass secrets through the environment (.env), never as flags")
        if name not in allowed:
            raise ToolkitError(f"{program} flag {name} is not in the toolkit's checked flag list",
                               "pyhelpers/launch/slime_flags.py",
                               f"check it against {CHECKED_AGAINST} and add it to the list (slime ignores "
                               f"unknown flags silently, so an unchecked flag may do nothing)")
    return argv
