#!/usr/bin/env python3
"""Measure the peak GPU memory of the vocab-logits log-prob path and compare it with pyhelpers.capacity.gpumem.

Runs where only torch (with CUDA) and the standard library exist: no network, no other package.
The estimate formulas live in pyhelpers/capacity/gpumem.py (stdlib-only, imported by path), so the
benchmark and `pyhelpers plan memory` share one source of truth.

Each measurement: hidden [T, H] bf16 and the output-layer weight [V/TP, H] bf16 (both leaves
whose .grad is allocated beforehand, as Megatron's gradient buffers are) exist; the peak of
torch.cuda.max_memory_allocated() above memory_allocated() just before the step is the cost of
the step. Variants (see memplan's docstring for the derivation of each):

  reference            logits = (h @ W^T).float(); log_softmax; gather targets; sum; backward
  reference-chunked    the same per chunk of rows (one backward over all chunks)
  reference-recompute  the same per chunk, each chunk under torch.utils.checkpoint
  slime                fp32 logits, then an in-place softmax autograd function written after
                       slime's _VocabParallelLogProbEntropy (TP group of one)
  slime-chunked        the same over logits.chunk(...), as --log-probs-chunk-size does
  slime-temperature    slime with --rollout-temperature 0.8: logits / temperature first

Example:
  python3 bench/logits_memory.py --out /tmp/out            # all rows, all variants
  python3 bench/logits_memory.py --tokens 4096 --tp 4 --variants reference
  python3 bench/logits_memory.py --dry-run                 # estimates only, no torch needed
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from arglists import ints  # noqa: E402  (bench/, also when run through runpy)

from pyhelpers.capacity import gpumem  # noqa: E402  (stdlib-only; package __init__s import nothing)

VARIANTS = ("reference", "reference-chunked", "reference-recompute", "slime", "slime-chunked",
            "slime-temperature")
NEEDS_TORCH = "torch with CUDA is required"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=ints, default=list(gpumem.TABLE_TOKENS), help="comma list of T")
    p.add_argument("--tp", type=ints, default=list(gpumem.TABLE_TP), help="comma list of TP sizes")
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma list of " + ", ".join(VARIANTS))
    p.add_argument("--chunk", type=int, default=1024, help="rows per chunk for the chunked variants")
    p.add_argument("--out", type=Path, help="directory for logits_memory.json and logits_memory.md")
    p.add_argument("--dry-run", action="store_true", help="print the estimates only (no torch, no GPU)")
    args = p.parse_args(argv)
    args.variants = [v for v in args.variants.split(",") if v]
    bad = [v for v in args.variants if v not in VARIANTS]
    if bad:
        p.error(f"unknown variant(s) {', '.join(bad)}; choose from {', '.join(VARIANTS)}")
    return args


def estimate(variant: str, tokens: int, tp: int, chunk: int) -> tuple[int, str]:
    model = gpumem.QWEN35_4B
    v = gpumem.vocab_per_rank(model, tp)
    return gpumem.logits_peak(variant, tokens, v, chunk=chunk if "chunk" in variant or "recompute" in variant
                               else 0, hidden=model.hidden)


# ---------------------------------------------------------------- the measured computations
def _build(torch):
    F = torch.nn.functional
    from torch.utils.checkpoint import checkpoint

    class InplaceLogProb(torch.autograd.Function):
        """log p(target) from fp32 logits using one scratch buffer, as slime's vocab-parallel
        function does on a TP group of one: the softmax is formed in place and saved, and the
        backward turns it into the gradient in place (no other [T, V] buffer)."""

        @staticmethod
        def forward(ctx, logits, target):
            peak = logits.max(dim=-1, keepdim=True).values
            buf = logits - peak
            picked = buf.gather(1, target[:, None])
            buf.exp_()
            total = buf.sum(dim=-1, keepdim=True)
            buf.div_(total)
            ctx.save_for_backward(buf, target)
            return (picked - total.log()).squeeze(-1)

        @staticmethod
        def backward(ctx, grad):
            prob, target = ctx.saved_tensors
            g = prob.neg_()
            g.scatter_add_(1, target[:, None], torch.ones_like(g[:, :1]))
            g.mul_(grad[:, None])
            return g, None

    def chunk_loss(h, w, t):
        return F.log_softmax(F.linear(h, w).float(), dim=-1).gather(1, t[:, None]).sum()

    def pieces(n_rows, chunk):
        return (n_rows - 1) // chunk + 1

    def reference(h, w, t, chunk):
        chunk_loss(h, w, t).backward()

    def reference_chunked(h, w, t, chunk):
        n = pieces(h.shape[0], chunk)
        loss = sum(chunk_loss(hc, w, tc) for hc, tc in zip(h.chunk(n), t.chunk(n), strict=True))
        loss.backward()

    def reference_recompute(h, w, t, chunk):
        n = pieces(h.shape[0], chunk)
        loss = sum(checkpoint(chunk_loss, hc, w, tc, use_reentrant=False)
                   for hc, tc in zip(h.chunk(n), t.chunk(n), strict=True))
        loss.backward()

    def slime(h, w, t, chunk, chunked=False, temperature=1.0):
        logits = F.linear(h, w).float()  # Megatron's Float16Module: fp32 copy, bf16 freed
        if temperature != 1.0:  # the caller (Megatron's forward_step) still holds `logits`
            lp = InplaceLogProb.apply(logits / temperature, t)
        elif chunked:
            n = pieces(h.shape[0], chunk)
            lp = torch.cat([InplaceLogProb.apply(lc, tc)
                            for lc, tc in zip(logits.chunk(n), t.chunk(n), strict=True)])
        else:
            lp = InplaceLogProb.apply(logits, t)
        del logits  # the loss function's reference ends before backward, as in Megatron
        lp.sum().backward()

    def slime_chunked(h, w, t, chunk):
        slime(h, w, t, chunk, chunked=True)

    def slime_temperature(h, w, t, chunk):
        slime(h, w, t, chunk, temperature=0.8)

    fns = {"reference": reference, "reference-chunked": reference_chunked,
           "reference-recompute": reference_recompute, "slime": slime, "slime-chunked": slime_chunked,
           "slime-temperature": slime_temperature}
    return fns, InplaceLogProb


def self_check(torch, inplace) -> float:
    """Relative gradient difference between the in-place function and log_softmax (fp64, CPU)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 1000, dtype=torch.float64, generator=g)
    t = torch.randint(0, 1000, (64,), generator=g)
    a = x.clone().requires_grad_()
    torch.log_softmax(a, -1).gather(1, t[:, None]).sum().backward()
    b = x.clone().requires_grad_()
    inplace.apply(b * 1.0, t).sum().backward()
    return float((a.grad - b.grad).norm() / a.grad.norm())


def measure(torch, fn, tokens: int, vocab_rank: int, hidden: int, chunk: int, seed: int) -> dict:
    dev = "cuda"
    gen = torch.Generator(device=dev).manual_seed(seed)
    h = (torch.randn(tokens, hidden, device=dev, generator=gen) * 0.5).bfloat16().requires_grad_()
    w = (torch.randn(vocab_rank, hidden, device=dev, generator=gen) * 0.02).bfloat16().requires_grad_()
    t = torch.randint(0, vocab_rank, (tokens,), device=dev, generator=gen)
    h.grad, w.grad = torch.zeros_like(h), torch.zeros_like(w)  # Megatron's grad buffers pre-exist
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    start = time.perf_counter()
    fn(h, w, t, chunk)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() - base
    ok = bool(torch.isfinite(w.grad).all().item() and torch.isfinite(h.grad).all().item())
    del h, w, t
    return {"measured_bytes": int(peak), "seconds": round(seconds, 3), "finite_grads": ok}


def run(args, torch) -> list[dict]:
    fns, inplace = _build(torch)
    err = self_check(torch, inplace)
    print(f"self-check: in-place log-prob gradient vs log_softmax, relative difference {err:.2e}")
    if not err < 1e-9:
        raise SystemExit(f"self-check failed: relative difference {err:.2e}")
    hidden = gpumem.QWEN35_4B.hidden
    for name in args.variants:  # warm-up: kernels, cuBLAS handles and workspaces of both threads
        measure(torch, fns[name], 2048, 4096, hidden, min(args.chunk, 1024), seed=1)
    rows = []
    for tp in args.tp:
        v = gpumem.vocab_per_rank(gpumem.QWEN35_4B, tp)
        for tokens in args.tokens:
            for name in args.variants:
                est, step = estimate(name, tokens, tp, args.chunk)
                row = {"variant": name, "tokens": tokens, "tp": tp, "vocab_per_rank": v,
                       "chunk": args.chunk if "chunk" in name or "recompute" in name else 0,
                       "estimated_bytes": est, "peak_step": step}
                try:
                    row.update(measure(torch, fns[name], tokens, v, hidden, args.chunk, seed=tokens + tp))
                    row["ratio"] = round(row["measured_bytes"] / est, 4)
                except torch.cuda.OutOfMemoryError:
                    row.update({"measured_bytes": None, "ratio": None, "error": "out of memory"})
                    torch.cuda.empty_cache()
                rows.append(row)
                print(format_row(row), flush=True)
    return rows


# ---------------------------------------------------------------- output
HEADER = (f"{'variant':<20} {'T':>6} {'TP':>3} {'V/TP':>7} {'measured GiB':>13} {'estimated GiB':>14} "
          f"{'ratio':>7}")


def format_row(row: dict) -> str:
    gib = gpumem.GIB
    meas = f"{row['measured_bytes'] / gib:13.3f}" if row.get("measured_bytes") is not None else f"{'-':>13}"
    ratio = f"{row['ratio']:7.3f}" if row.get("ratio") is not None else f"{row.get('error', '-'):>7}"
    return (f"{row['variant']:<20} {row['tokens']:>6} {row['tp']:>3} {row['vocab_per_rank']:>7} {meas} "
            f"{row['estimated_bytes'] / gib:14.3f} {ratio}")


def markdown(rows: list[dict], meta: dict) -> str:
    gib = gpumem.GIB
    lines = [f"Measured {meta['date']} on {meta['gpu']} ({meta['gpu_memory_gib']} GiB), torch {meta['torch']} "
             f"(CUDA {meta['cuda']}); H={meta['hidden']}, V={meta['vocab']}, chunk={meta['chunk']} rows.", "",
             "| variant | T | TP | V/TP | measured GiB | estimated GiB | measured / estimated |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        meas = f"{r['measured_bytes'] / gib:.3f}" if r.get("measured_bytes") is not None else r.get("error", "-")
        ratio = f"{r['ratio']:.3f}" if r.get("ratio") is not None else "-"
        lines.append(f"| {r['variant']} | {r['tokens']} | {r['tp']} | {r['vocab_per_rank']} | {meas} | "
                     f"{r['estimated_bytes'] / gib:.3f} | {ratio} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.dry_run:
        print(HEADER)
        for tp in args.tp:
            v = gpumem.vocab_per_rank(gpumem.QWEN35_4B, tp)
            for tokens in args.tokens:
                for name in args.variants:
                    est, _ = estimate(name, tokens, tp, args.chunk)
                    print(format_row({"variant": name, "tokens": tokens, "tp": tp, "vocab_per_rank": v,
                                      "estimated_bytes": est, "measured_bytes": None}))
        return 0
    # Fewer fragmentation failures at 100 GB sizes; must be set before CUDA initialises.
    os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    try:
        import torch
    except ImportError:
        print(f"{NEEDS_TORCH}: torch is not importable here (run this on the GPU machine, or use --dry-run "
              "for the estimates only)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print(f"{NEEDS_TORCH}: torch {torch.__version__} sees no CUDA device (run this on the GPU machine, "
              "or use --dry-run for the estimates only)", file=sys.stderr)
        return 2
    props = torch.cuda.get_device_properties(0)
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"), "gpu": props.name,
            "gpu_memory_gib": round(props.total_memory / gpumem.GIB, 1), "torch": torch.__version__,
            "cuda": torch.version.cuda, "hidden": gpumem.QWEN35_4B.hidden, "vocab": gpumem.QWEN35_4B.vocab,
            "chunk": args.chunk, "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}
    print(json.dumps(meta))
    print(HEADER)
    rows = run(args, torch)
    print()
    print(HEADER)
    for r in rows:
        print(format_row(r))
    worst = max((abs(r["ratio"] - 1) for r in rows if r.get("ratio") is not None), default=None)
    if worst is not None:
        print(f"largest |measured/estimated - 1| = {worst:.3f}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "logits_memory.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
        (args.out / "logits_memory.md").write_text(markdown(rows, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
