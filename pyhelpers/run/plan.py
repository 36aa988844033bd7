"""`make plan`: what `make train` / `make resume` would do, without doing any of it.

Resume point and the stages still to run (from the artifacts, as the driver derives them), every
command line the run launches (no secret is ever on one; the secrets it passes through the
environment are named, their values masked), the disk arithmetic, and the addresses it opens.
Read-only: the plan writes no file, not even the run's directories.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import replace

from pyhelpers.capacity import diskguard
from pyhelpers.errors import ToolkitError
from pyhelpers.launch import cluster, node_env, ray_ports, secret_env, services
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


def launches(cfg, lay: RunLayout, pos: runstate.Position,
             model_args: list[str] | None) -> list[tuple[str, str, str]]:
    """(name, command line, note) of what the run launches from `pos` on, in order, each command
    built by the very function its stage calls. The name is the service's (its log is
    logs/<name>.log) or "slime job" (the Ray job); evaluate has a note instead of a command."""
    from pyhelpers.loop.stages import evaluate, export, train

    r = 0 if pos.round is None else pos.round

    def service(name: str, note: str = "", **kw) -> tuple[str, str, str]:
        return name, shlex.join(services.spec(cfg, lay, name, **kw).argv), note

    out = [service("shopsim")]
    multi = node_env.multinode(cfg)
    if multi:
        out.append(service("shopsim-gate", "the simulator for the other nodes: NODE_ADDR, the run's token"))
    if pos.stage == "baseline":
        out.append(service("eval-server", "baseline: the base model's bare val",
                           model=evaluate.model_dir(cfg, lay, baseline=True)))
    out.append(service("ray-head"))
    if multi:
        out.append(_worker(cfg))
    margs = model_args if model_args is not None else ["${MODEL_ARGS[@]}"]
    out.append(("slime job", train.job_entrypoint(cfg, lay, r=r, model_args=margs),
                f"through the Ray job API as {cfg.run_name}-r{r:03d}-<time>; runtime env "
                f"{json.dumps(launch_args.runtime_env(cfg, secret_env.job_netrc_entry(cfg, lay.run_dir)), sort_keys=True)}; MODEL_ARGS from {cfg['MODEL_ARGS_SCRIPT']}"))
    if cfg.flag("ANALYST_ENABLED"):
        out.append(("analyst", shlex.join(train.analyst_argv(lay, r)),
                    f"its model: {cfg['ANALYST_MODEL']} at {cfg['ANALYST_BASE_URL']}"))
    out.append(("convert", shlex.join(export.convert_argv(cfg, lay, lay.last_iteration(r))),
                "skipped when slime's --save-hf wrote the export" if cfg.flag("SAVE_HF") else ""))
    out.append(service("eval-server", model=evaluate.model_dir(cfg, lay)))
    out.append(("evaluate", "", "no command line: bare val, then the gate, in the loop's own process"))
    for name in services.BACKGROUND:
        if name != "wandb-log" or cfg.get("WANDB_MODE") != "disabled":
            out.append((name, shlex.join(services.background_argv(name)), "in the background"))
    return out


def _worker(cfg) -> tuple[str, str, str]:
    """What `make join` starts on each worker, as this head's configuration says it (the worker's own
    NODE_ADDR and NET_IFACE are its .env's)."""
    wcfg = replace(cfg, values={**cfg.values, "HEAD_ADDR": cfg["NODE_ADDR"], "NODE_ADDR": "<its NODE_ADDR>",
                                "NET_IFACE": "<its NET_IFACE>"})
    n = cfg.int("NNODES") - 1
    return (f"worker (make join HEAD_ADDR={cfg['NODE_ADDR']} on each of the {n} worker(s))",
            shlex.join(cluster.worker_argv(wcfg)),
            "its environment: " + _node_env_text(wcfg))


def _node_env_text(cfg) -> str:
    return ", ".join(f"{k}={v}" for k, v in node_env.of_this_node(cfg).items()) + ", no proxy variable"


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

    out.append(f"command lines (round {r}; later rounds differ only in their round number, dir and iterations):")
    for name, line, note in launches(cfg, lay, pos, model_args=model_args):
        out.append(f"  {name}: {line}" if line else f"  {name}: {note}")
        if line and note:
            out.append(f"    ({note})")
    secrets = sorted(n for n in cfg.secret_names if cfg.get(n))
    out.append("environment: CUDA_VISIBLE_DEVICES=" + cfg.cuda_visible_devices
               + f", WANDB_DIR={lay.wandb_dir}, WANDB_MODE={cfg['WANDB_MODE']}; secrets passed only through "
               "the environment: " + (", ".join(f"{n}=***" for n in secrets) or "none set"))
    for stage in ("train", "export"):
        n = diskguard.need(cfg, lay, stage)
        out.append(f"disk: {n.explain()} -> {'ok' if n.fits else 'SHORT'}")
    ray = ", ".join(f"{p.what} {p.port}" for p in ray_ports.ports(cfg))
    if node_env.multinode(cfg):
        out.append(f"each node's `ray start` also gets its own address and interface (this head: "
                   f"{_node_env_text(cfg)}); the job's runtime env clears the proxy variables")
    gate = f", {cfg['NODE_ADDR']}:{cfg['SHOPSIM_PORT']} (ShopSimulator's gate, token required)" \
        if node_env.multinode(cfg) else ""
    ray_where = (f"Ray on {cfg['NODE_ADDR']} and 127.0.0.1 (its gRPC servers on every address: docs/multinode.md "
                 "§4), the dashboard and job API on 127.0.0.1") if node_env.multinode(cfg) else "Ray on 127.0.0.1 only"
    out.append(f"opens: shopsim {cfg['SHOPSIM_HOST']}:{cfg['SHOPSIM_PORT']}{gate}, eval server 127.0.0.1:{cfg['EVAL_PORT']}, "
               f"{ray_where}, the run's token required ({ray}; workers on kernel-chosen ports); "
               f"Ray temp dir {cfg.ray_temp_dir}")
    return out
