"""Benchmark: the gate's power and MDE for a range of budgets (the docs/gate.md budget table).

For each number of gated skills K and foldover pairs N it prints the closed-form MDE (80% power,
Bonferroni over K at GATE_ALPHA, pair-difference variance 2·0.3·0.7 = 0.42: success ≈ 30%, no
task heterogeneity, the conservative case) and, from the seeded simulator run through the real
plan -> estimate -> decide code, how often a +15 / +10 point skill is accepted, a -15 point skill
rejected, and a null skill accepted, in one round.

    .venv/bin/python bench/gate_power.py [--seeds 100] [--alpha GATE_ALPHA]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyhelpers.config.load import load  # noqa: E402
from pyhelpers.gate.decide import mde  # noqa: E402
from pyhelpers.gate.plan import GateKnobs  # noqa: E402
from pyhelpers.gate.simulate import simulate_round  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--alpha", type=float, help="GATE_ALPHA [default: the configuration's]")
    args = ap.parse_args()
    base = GateKnobs.from_config(load())  # the other knobs as this checkout's configuration has them
    args.alpha = base.alpha if args.alpha is None else args.alpha
    t0 = time.perf_counter()
    print(f"{'K':>2} {'pairs':>5} {'episodes':>8} {'MDE pts':>7} {'+15 acc':>7} {'+10 acc':>7} "
          f"{'-15 rej':>7} {'null acc':>8}")
    for k in (4, 6, 8):
        for pairs in (64, 128, 192, 256, 384, 512):
            knobs = replace(base, pairs=pairs, alpha=args.alpha)
            m = mde((0.42 / pairs) ** 0.5, args.alpha, k, pairs - k)
            eff = {"sk-a": 0.15, "sk-b": 0.10, "sk-c": -0.15, **{f"sk-n{i}": 0.0 for i in range(k - 3)}}
            hits = {"sk-a": 0, "sk-b": 0, "sk-c": 0, "null": 0}
            for seed in range(args.seeds):
                d = simulate_round(eff, knobs, seed=10_000 + seed)[2]["decisions"]
                hits["sk-a"] += d["sk-a"]["decision"] == "accept"
                hits["sk-b"] += d["sk-b"]["decision"] == "accept"
                hits["sk-c"] += d["sk-c"]["decision"] == "reject"
                hits["null"] += sum(d[s]["decision"] == "accept" for s in eff if s.startswith("sk-n"))
            r = {s: v / args.seeds for s, v in hits.items()}
            r["null"] = hits["null"] / (args.seeds * max(k - 3, 1))
            print(f"{k:>2} {pairs:>5} {2 * pairs + 64:>8} {m * 100:>7.1f} {r['sk-a']:>7.0%} {r['sk-b']:>7.0%} "
                  f"{r['sk-c']:>7.0%} {r['null']:>8.1%}")
    print(f"({args.seeds} seeds per row, alpha {args.alpha}, {time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
