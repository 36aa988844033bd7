"""The toolkit's own train.py argv for slime's real code (the slime lane): what `make plan` shows,
built from a configuration the test gives (the doctor's flag check builds the same list)."""

from __future__ import annotations

import os
from pathlib import Path


def plan_argv(tmp_path: Path, nnodes: int, hf_model: Path | None = None, one_job: bool = False, **knobs: str):
    """(cfg, argv): round 0's train.py flags, MODEL_ARGS of slime's own scripts/models/qwen3.5-4B.sh
    first; round 0's plugin YAML written where --custom-config-path points, as the train stage
    writes it before the job starts (pyhelpers/stages/train.py). `hf_model`: a model directory
    (default: the test tokenizer with Qwen3.5-4B's config.json, which slime validates against).
    one_job: the one-job mode's job instead (`make plan` shows both; docs/one-job-mode.md)."""
    from support.tokenizer import build_tokenizer

    from pyhelpers.config import load as config
    from pyhelpers.doctor.base import Context
    from pyhelpers.doctor.flags import plan_argvs
    from pyhelpers.rollout.settings import plugin_values, write_plugin_yaml
    from pyhelpers.run.layout import from_config

    hf = hf_model or build_tokenizer(tmp_path / "models" / "Qwen3.5-4B")
    env_file = tmp_path / ".env"
    env_file.write_text("")
    env = {"SHOPSIMRL_ENV_FILE": str(env_file), "RUNS_DIR": str(tmp_path / "runs"), "TRAIN_SAVE": str(tmp_path / "save"),
           "DATA_DISK": str(tmp_path), "SYSTEM_DISK": "/dev/shm", "NNODES": str(nnodes), "HF_MODEL": str(hf),
           "SLIME_DIR": os.environ["SHOPSIMRL_SLIME_DIR"],
           "MEGATRON_DIR": os.environ["SHOPSIMRL_MEGATRON_PATH"], "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           **knobs}
    cfg = config.load(env)
    lay = from_config(cfg)
    lay.plugin_config(0).parent.mkdir(parents=True, exist_ok=True)
    write_plugin_yaml(lay.plugin_config(0), **plugin_values(cfg, lay, 0))
    ctx = Context(cfg, env, cfg.DOCTOR_PROFILE)
    if one_job:
        from pyhelpers.doctor.flags import model_args
        from pyhelpers.launch.slime_args import job_flags

        return cfg, [*model_args(ctx), *job_flags(cfg, lay, 0, one_job=True)]
    return cfg, plan_argvs(ctx)[0]


def slime_args(cfg, argv: list[str], monkeypatch):
    """slime's own parse_args on train.py `argv`, in the environment the driver submits the job
    with (slime_args.runtime_env: CUDA_DEVICE_MAX_CONNECTIONS, which Megatron requires under tensor
    parallelism). Needs the sm80 fixture (conftest.py): the GPU-arch query."""
    import sys

    from slime.utils.arguments import parse_args

    from pyhelpers.launch.slime_args import runtime_env

    for name, value in runtime_env(cfg)["env_vars"].items():
        if name != "PYTHONPATH":
            monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["train.py", *argv])
    return parse_args()
