"""The SGLang eval server's command line (`sglang.launch_server` through SGLANG_LAUNCHER), its
flags checked against the pinned SGLang's (pyhelpers/launch/slime_flags.py)."""

from __future__ import annotations

import shlex

from pyhelpers.config.load import Config
from pyhelpers.launch import slime_flags


def eval_server(cfg: Config, model_path: str) -> list[str]:
    """The SGLang eval server on the round's HF export: TP=1, DP=NUM_GPUS (M9), loopback only."""
    argv = ["--model-path", model_path, "--tp-size", "1", "--dp-size", str(cfg.NUM_GPUS),
            "--host", "127.0.0.1", "--port", str(cfg.EVAL_PORT), "--context-length", str(cfg.ROLLOUT_MAX_CONTEXT_LEN)]
    slime_flags.check(argv, slime_flags.SGLANG_SERVER_FLAGS, "sglang.launch_server")
    return [*shlex.split(cfg.SGLANG_LAUNCHER), *argv]
