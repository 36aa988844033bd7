"""`make plan`: what `make train` / `make resume` would do, without doing any of it.

Resume point and the stages still to run (from the artifacts, as the driver derives them), every
command line the run launches (no secret is ever on one; the secrets it passes through the
environment are named, their values masked), the disk arithmetic, and the addresses it opens.
Read-only: the plan writes no file, not even the run's directories.
"""

from __future__ import annotations

import shlex

from pyhelpers import stages
from pyhelpers.capacity import diskguard
from pyhelpers.capacity.diskplan import gb
from pyhelpers.config import jit_caches, ray_ports
from pyhelpers.config.load import Config
from pyhelpers.errors import ToolkitError
from pyhelpers.launch import cluster, services, slime_args
from pyhelpers.overview import rehearsal
from pyhelpers.run import hints
from pyhelpers.run.layout import RunLayout
from pyhelpers.stages import position


def _chain(labels: list[str], chain: tuple, beside: bool) -> str:
    """Stages in order; `a || b` where a runs beside b (VAL_BESIDE_COMPILE, the registry's BESIDE)."""
    out = labels[0]
    for prev, stage, label in zip(chain, chain[1:], labels[1:], strict=False):
        out += (" || " if beside and prev.beside == stage.name else " -> ") + label
    return out


def _stages_left(pos: position.Position, rounds: int, beside: bool = False) -> list[str]:
    if pos.finished:
        return []
    out = []
    if pos.stage == stages.BASELINE.name:
        out.append(f"{stages.BASELINE.label}: {stages.BASELINE.summary}")
        first, start = 0, 0
    else:
        first, start = pos.round, stages.NAMES.index(pos.stage)
    for r in range(first, rounds):
        names = [s.label for s in stages.ROUND[start if r == first else 0:]]
        out.append(f"round {r}: " + _chain(names, stages.ROUND[start if r == first else 0:], beside))
    return out


def _what_next(lay: RunLayout, exists: bool, finished: bool) -> str:
    """The plan's first words: what the run is and the commands that act on it, a rehearsal's own
    (hints.py; `make rehearse` starts a new rehearsal, it does not continue this one)."""
    if not exists:
        return "new (make train)"
    is_rehearsal = bool(rehearsal.is_rehearsal(lay))
    if finished:
        return hints.for_run(is_rehearsal)("finished: nothing to do (its report: make report; where it stands: "
                                           "make status)")
    return ("continues (make rehearse RESUME=1; make rehearse starts a new rehearsal instead)" if is_rehearsal
            else "continues (make resume / make train)")


def launches(cfg: Config, lay: RunLayout, pos: position.Position,
             model_args: list[str] | None) -> list[tuple[str, str, str]]:
    """(name, command line, note) of what the run launches from `pos` on, in order: each stage's
    `launches()` (built by the very functions the stage calls), then the background services. The
    name is the service's (its log is logs/<name>.log) or "slime job" (the Ray job)."""
    r = 0 if pos.round is None else pos.round
    margs = model_args if model_args is not None else ["${MODEL_ARGS[@]}"]
    seq = ([stages.BASELINE] if pos.stage == stages.BASELINE.name else []) + list(stages.ROUND)
    out: list[tuple[str, str, str]] = []
    for stage in seq:
        out += [item for item in stage.launches(cfg, lay, r, margs) if item not in out]
    for name in services.BACKGROUND:
        if name != "wandb-log" or cfg.WANDB_MODE != "disabled":
            out.append((name, shlex.join(services.background_argv(name)), "in the background"))
    return out


def _other_mode(cfg: Config, lay: RunLayout, r: int, model_args: list[str] | None) -> list[str]:
    """The slime job of the mode ONE_JOB does not choose, beside the one it runs (docs/one-job-mode.md),
    so both modes' command lines can be compared."""
    margs = model_args if model_args is not None else ["${MODEL_ARGS[@]}"]
    one = not cfg.ONE_JOB
    line = slime_args.slime_entrypoint(cfg, margs, slime_args.job_flags(cfg, lay, r, one_job=one))
    if one:
        return [f"one-job mode (ONE_JOB=1, docs/one-job-mode.md), one slime job for rounds {r}..{cfg.ROUNDS - 1}:",
                f"  slime job (ONE_JOB=1): {line}",
                "    (val and the gate in the job at each round's end, no --save-hf: the export converts on the CPU)"]
    return [f"the round-by-round order (ONE_JOB=0): a slime job per round, round {r}'s:", f"  slime job (ONE_JOB=0): {line}",
            "    (then the eval server on the round's HF export plays val and the gate)"]


def plan(cfg: Config, lay: RunLayout, model_args: list[str] | None = None) -> list[str]:
    rounds = cfg.ROUNDS
    exists = lay.manifest.is_file()
    try:
        pos = position.position(lay, rounds, cfg.BASELINE_VAL)
    except ToolkitError as exc:
        return [f"run {cfg.run_name}: cannot plan: {exc}"]
    r = 0 if pos.round is None else pos.round
    out = [f"run {cfg.run_name}: {_what_next(lay, exists, pos.finished)}", f"  state {lay.run_dir}",
           f"  weights {lay.save_dir}"]
    out.append("resume point: " + ("finished, nothing to do" if pos.finished
                                   else f"round {pos.round}, stage {pos.stage} ({pos.detail})"))
    if pos.finished:
        return out
    beside = cfg.VAL_BESIDE_COMPILE
    out += ["stages:" + (" (a || b: b starts while a runs; the gate waits for compiled.json)" if beside else "")]
    out += [f"  {s}" for s in _stages_left(pos, rounds, beside)]

    out.append(f"command lines (round {r}; later rounds differ only in their round number, dir and iterations):")
    for name, line, note in launches(cfg, lay, pos, model_args=model_args):
        out.append(f"  {name}: {line}" if line else f"  {name}: {note}")
        if line and note:
            out.append(f"    ({note})")
    out += _other_mode(cfg, lay, r, model_args)
    secrets = sorted(n for n in cfg.secret_names if cfg.get(n))
    out.append("environment: CUDA_VISIBLE_DEVICES=" + cfg.cuda_visible_devices
               + f", WANDB_DIR={lay.wandb_dir}, WANDB_MODE={cfg.WANDB_MODE}; secrets passed only through "
               "the environment: " + (", ".join(f"{n}=***" for n in secrets) or "none set"))
    caches = jit_caches.env(cfg)
    out.append(f"JIT caches: {jit_caches.root(lay.save_dir)} ({gb(jit_caches.size_bytes(lay.save_dir))} now), "
               "for the slime job's Megatron and engines and the eval server: "
               + " ".join(f"{k}={v}" for k, v in caches.items()) if caches else
               "JIT caches: each program's default under ~ or /tmp (JIT_CACHE_ON_DATA_DISK=0)")
    for stage in (s for s in stages.ROUND if s.writes):
        n = diskguard.need(cfg, lay, stage.name, stage.writes)
        out.append(f"disk: {n.explain()} -> {'ok' if n.fits else 'SHORT'}")
    ray = ", ".join(f"{p.what} {p.port}" for p in ray_ports.ports(cfg))
    if cfg.multinode:
        out.append(f"each node's `ray start` also gets its own address and interface (this head: "
                   f"{cluster.node_env_text(cfg)}); the job's runtime env clears the proxy variables")
    gate = f", {cfg.NODE_ADDR}:{cfg.SHOPSIM_PORT} (ShopSimulator's gate, token required)" \
        if cfg.multinode else ""
    ray_where = (f"Ray on {cfg.NODE_ADDR} and 127.0.0.1 (its gRPC servers on every address: docs/multinode.md "
                 "§4), the dashboard and job API on 127.0.0.1") if cfg.multinode else "Ray on 127.0.0.1 only"
    out.append(f"opens: shopsim {cfg.SHOPSIM_HOST}:{cfg.SHOPSIM_PORT}{gate}, eval server 127.0.0.1:{cfg.EVAL_PORT}, "
               f"{ray_where}, the run's token required ({ray}; workers on kernel-chosen ports); "
               f"Ray temp dir {cfg.ray_temp_dir}")
    return out
