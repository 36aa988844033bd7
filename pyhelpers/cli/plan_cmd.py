"""`pyhelpers plan ...`: what a launch would cost, before it happens (changes nothing).

The group is shared: other plan subcommands (e.g. the training driver's plan) register here with
``@plan.command(...)``.
"""

from __future__ import annotations

import json

import click

from pyhelpers.capacity import gpumem
from pyhelpers.config import load
from pyhelpers.config.load import Config


@click.group()
def plan():
    """Plan a launch without starting anything."""


def _gib(n: int) -> str:
    return f"{n / gpumem.GIB:.2f}"


def _cfg_values(cfg: Config) -> dict:
    return {
        "NUM_GPUS": cfg.NUM_GPUS, "TP_SIZE": cfg.TP_SIZE,
        "MAX_TOKENS_PER_GPU": cfg.MAX_TOKENS_PER_GPU,
        "ROLLOUT_MAX_CONTEXT_LEN": cfg.ROLLOUT_MAX_CONTEXT_LEN,
        "GPU_MEMORY_GB": cfg.GPU_MEMORY_GB, "MEMORY_WARN_FRACTION": cfg.MEMORY_WARN_FRACTION,
    }


def _table_lines(rows, tps, limit: int) -> list[str]:
    lines = ["T \\ TP_SIZE " + "".join(f"{tp:>18}" for tp in tps)]
    for row in rows:
        tokens = next(p.tokens for p in row if p is not None)
        cells = []
        for p in row:
            if p is None:
                cells.append(f"{'-':>18}")
                continue
            mark = " !" if p.total > limit else "  "
            cells.append(f"{_gib(p.total):>8} ({_gib(p.terms['logits']):>6}){mark}")
        lines.append(f"{tokens:>11} " + "".join(cells))
    return lines


@plan.command("memory")
@click.option("--json", "as_json", is_flag=True, help="One JSON object, for machines.")
@click.option("--path", "path", type=click.Choice(["slime", "reference"]), default="slime", show_default=True,
              help="Logits path: slime's in-place log-prob function (8 B/element) or a plain log_softmax "
                   "(12 B/element, an upper bound).")
@click.option("--recompute/--no-recompute", default=True, show_default=True,
              help="Assume full activation recompute (--recompute-granularity full).")
@click.option("--strict", is_flag=True, help="Exit 1 when the configured point does not fit.")
def memory(as_json, path, recompute, strict):
    """Per-GPU peak memory of a training micro-batch (vocab logits, model state, activations).

    Reads NUM_GPUS, TP_SIZE, MAX_TOKENS_PER_GPU, ROLLOUT_MAX_CONTEXT_LEN, GPU_MEMORY_GB and
    MEMORY_WARN_FRACTION; prints the configured point, a WARN with the knob to turn when it
    exceeds the fraction of GPU memory, and a table over micro-batch tokens x TP_SIZE.
    Derivation and measurements: docs/oom_qwen35_4b.md.

    \b
    Example:
      pyhelpers plan memory
      MAX_TOKENS_PER_GPU=32768 TP_SIZE=1 pyhelpers plan memory --json
    """
    cfg = load.load()
    v = _cfg_values(cfg)  # (the JSON answer names the knobs it read)
    kw = {"path": path, "recompute": recompute}
    ver = gpumem.verdict(cfg.MAX_TOKENS_PER_GPU, cfg.ROLLOUT_MAX_CONTEXT_LEN, tp=cfg.TP_SIZE, num_gpus=cfg.NUM_GPUS,
                          gpu_gib=cfg.GPU_MEMORY_GB, fraction=cfg.MEMORY_WARN_FRACTION, **kw)
    other = "reference" if path == "slime" else "slime"
    alt = gpumem.plan(ver.plan.tokens, ver.plan.tp, cfg.NUM_GPUS, path=other, recompute=recompute)
    rows = gpumem.table(cfg.NUM_GPUS, **kw)
    if as_json:
        click.echo(json.dumps({
            "knobs": v, "path": path, "recompute": recompute, "limit_bytes": ver.limit_bytes,
            "fits": ver.fits, "warning": ver.warning, "max_tokens_fit": ver.max_tokens_fit, "tp_fit": ver.tp_fit,
            "plan": ver.plan.as_dict(), "rough_terms": gpumem.ROUGH,
            "alternative": alt.as_dict(),
            "table": [p.as_dict() for row in rows for p in row if p is not None],
        }, indent=2, sort_keys=True))
    else:
        _print_text(cfg, ver, alt=alt, rows=rows, recompute=recompute)
    if strict and not ver.fits:
        raise SystemExit(1)


def _print_text(cfg: Config, ver, alt, rows, recompute) -> None:
    p = ver.plan
    click.echo(f"Memory plan per GPU: {p.model}, NUM_GPUS={cfg.NUM_GPUS}, TP_SIZE={p.tp} (DP={p.dp}), "
               f"logits path: {p.path}, recompute: {'full' if recompute else 'off'}")
    click.echo(f"micro-batch T = {p.tokens} tokens = max(MAX_TOKENS_PER_GPU={cfg.MAX_TOKENS_PER_GPU}, "
               f"ROLLOUT_MAX_CONTEXT_LEN={cfg.ROLLOUT_MAX_CONTEXT_LEN}): a longer episode is packed alone")
    per_el = p.terms["logits"] // (p.tokens * p.vocab_rank)
    labels = {
        "logits": f"logits [T, V/TP] = [{p.tokens}, {p.vocab_rank}] x {per_el} B ({p.peak_step})",
        "weights": "weights, bf16, P/TP",
        "grads": "grads, fp32 main_grad, P/TP",
        "optimizer": "optimizer, fp32 master + Adam m,v, P/(TP*DP)",
        "activations": "activations kept at the logits peak",
        "runtime": "runtime: CUDA context, NCCL, workspaces",
    }
    for name, n in p.terms.items():
        rough = "  rough" if name in gpumem.ROUGH else ""
        click.echo(f"  {_gib(n):>7} GiB  {labels[name]}{rough}")
    click.echo(f"  {_gib(p.total):>7} GiB  total per GPU")
    limit = f"{_gib(ver.limit_bytes)} GiB (MEMORY_WARN_FRACTION={cfg.MEMORY_WARN_FRACTION:g} x " \
            f"GPU_MEMORY_GB={cfg.GPU_MEMORY_GB:g})"
    if ver.fits:
        click.echo(f"fits: yes, {_gib(p.total)} GiB <= {limit}")
    else:
        click.echo(f"fits: no, {_gib(p.total)} GiB > {limit}")
        click.echo(ver.warning)
    click.echo(f"(with the {alt.path} logits path: logits {_gib(alt.terms['logits'])} GiB, "
               f"total {_gib(alt.total)} GiB)")
    click.echo("")
    click.echo(f"Total GiB per GPU (logits GiB) by micro-batch tokens T x TP_SIZE, NUM_GPUS={cfg.NUM_GPUS}; "
               f"'!' = over {_gib(ver.limit_bytes)} GiB, '-' = TP_SIZE not possible:")
    for line in _table_lines(rows, gpumem.TABLE_TP, ver.limit_bytes):
        click.echo(line)
