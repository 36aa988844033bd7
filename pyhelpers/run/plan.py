"""`make plan`: what `make train` / `make resume` would do, without doing any of it.

Resume point and the stages still to run (from the artifacts, as the driver derives them), every
command line the run launches (no secret is ever on one; the secrets it passes through the
environment are named, their values masked), the disk arithmetic, and the addresses it opens.
Read-only: the plan writes no file, not even the run's directories.
"""

from __future__ import annotations

import json
import shlex

from pyhelpers.capacity import diskguard
from pyhelpers.errors import ToolkitError
from pyhelpers.launch import ray_ports, services
from pyhelpers.launch import slime_args as launch_args
from pyhelpers.loop.stages import NAMES as STAGES
from pyhelpers.run import state as runstate
from pyhelpers.run.layout import RunLayout


def _stages_left(pos: runstate.Position, rounds: int) -> list[str]:
    if pos.finished:
        return []
    out = []
    if pos.stage == "baseline":
        out.append("baseline: bare val of the base model")
        first, start = 0, 0
    else:
        first, start = pos.round, STAGES.index(pos.stage)
    for r in range(first, rounds):
        names = STAGES[start:] if r == first else STAGES
        out.append(f"round {r}: " + " -> ".join(names))
    return out


def plan(cfg, lay: RunLayout, model_args: list[str] | None = None) -> list[str]:
    rounds = cfg.int("ROUNDS")
    exists = lay.manifest.is_file()
    try:
        pos = runstate.position(lay, rounds, cfg.flag("BASELINE_VAL"))
    except ToolkitError as exc:
        return [f"run {cfg.run_name}: cannot plan: {exc}"]
    r = 0 if pos.round is None else pos.round
    head = f"run {cfg.run_name}: " + ("continues (make resume / make train)" if exists else "new (make train)")
    out = [head, f"  state {lay.run_dir}", f"  weights {lay.save_dir}"]
    out.append("resume point: " + ("finished, nothing to do" if pos.finished
                                   else f"round {pos.round}, stage {pos.stage} ({pos.detail})"))
    out += ["stages:"] + [f"  {s}" for s in _stages_left(pos, rounds)]
    if pos.finished:
        return out

    from pyhelpers.rollout.flags import plugin_flags

    out.append(f"command lines (round {r}; later rounds differ only in --num-rollout and the round's slime.yaml):")
    for name in ("shopsim", "ray-head"):
        out.append(f"  {name}: " + shlex.join(services.spec(cfg, lay, name).argv))
    slime = launch_args.slime_train(cfg, lay, r, plugin_flags())
    margs = model_args if model_args is not None else ["${MODEL_ARGS[@]}"]
    out.append(f"  slime job (Ray job API, submission id {cfg.run_name}-r{r:03d}-<time>): "
               + launch_args.slime_entrypoint(cfg, margs, slime))
    out.append(f"    runtime env: {json.dumps(launch_args.runtime_env(cfg), sort_keys=True)}"
               f"; MODEL_ARGS from {cfg['MODEL_ARGS_SCRIPT']}")
    if cfg.flag("ANALYST_ENABLED"):
        out.append(f"  analyst: python -m pyhelpers analyst run --round-dir {lay.round_dir(r)} --wandb "
                   f"(model {cfg['ANALYST_MODEL']} at {cfg['ANALYST_BASE_URL']})")
    it = lay.last_iteration(r)
    convert = launch_args.slime_tool(cfg, "CONVERT_TO_HF", "--input-dir", str(lay.megatron / f"iter_{it:07d}"),
                                     "--output-dir", str(lay.hf_staging(it)), "--origin-hf-dir", str(cfg.path("HF_MODEL")))
    out.append("  export: " + shlex.join(convert) + (" (skipped when --save-hf wrote it)" if cfg.flag("SAVE_HF") else ""))
    out.append("  eval-server: " + shlex.join(services.spec(cfg, lay, "eval-server").argv))
    out.append(f"  evaluate: python -m pyhelpers eval val / eval gate --round-dir {lay.round_dir(r)} --resume --wandb")
    secrets = sorted(n for n in cfg.secret_names if cfg.get(n))
    out.append("environment: CUDA_VISIBLE_DEVICES=" + cfg.cuda_visible_devices
               + f", WANDB_DIR={lay.wandb_dir}, WANDB_MODE={cfg['WANDB_MODE']}; secrets passed only through "
               "the environment: " + (", ".join(f"{n}=***" for n in secrets) or "none set"))
    for stage in ("train", "export"):
        n = diskguard.need(cfg, lay, stage)
        out.append(f"disk: {n.explain()} -> {'ok' if n.fits else 'SHORT'}")
    ray = ", ".join(f"{p.what} {p.port}" for p in ray_ports.ports(cfg))
    out.append(f"opens: shopsim {cfg['SHOPSIM_HOST']}:{cfg['SHOPSIM_PORT']}, eval server 127.0.0.1:{cfg['EVAL_PORT']}, "
               f"Ray on 127.0.0.1 only, the run's token required ({ray}; workers on kernel-chosen ports); "
               f"Ray temp dir {cfg.ray_temp_dir}")
    return out
