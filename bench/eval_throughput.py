"""Benchmark: does the eval runner keep EVAL_CONCURRENCY episodes in flight? (architecture §10)

Starts the fakes of tests/ (ShopSimulator with 48 slots; SGLang with a fixed delay per /generate
standing in for generation time) and plays N episodes through the real runner
(pyhelpers.evaluate.runner.run_episodes: slot ledger, fsynced episodes.jsonl, progress) at
concurrency C. Prints the throughput, the mean episode latency, and the ratio of the throughput
to the concurrency bound C / mean latency (Little's law: 1.0 = always C in flight). Target
>= 0.95. The ratio includes the start and the tail (the last episodes run with fewer in flight),
so use enough episodes: the drain costs about C / (2 N) of the ratio (N >> C).

    .venv/bin/python bench/eval_throughput.py [--episodes 1280] [--concurrency 32] [--latency-ms 100]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fakes.procs import start_fake_sglang, start_fake_shopsim, stop  # noqa: E402
from support.eval_world import make_world  # noqa: E402

from pyhelpers.evaluate.episode import EpisodeSpec  # noqa: E402
from pyhelpers.evaluate.runner import run_episodes  # noqa: E402
from pyhelpers.evaluate.settings import EvalSettings  # noqa: E402
from pyhelpers.evaluate.val import load_builder  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=1280)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--latency-ms", type=float, default=100.0, help="fixed delay of each /generate")
    ap.add_argument("--tasks", type=int, default=64, help="distinct val tasks the episodes cycle over")
    ap.add_argument("--max-turns", type=int, default=8)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        world = make_world(Path(tmp) / "world", n_tasks=a.tasks)
        shop = start_fake_shopsim(world.catalog, slots=48, seed=1, retries=3, delay=0.2)
        sg = start_fake_sglang(world.tokenizer, policy=world.policy, latency_ms=a.latency_ms)
        try:
            settings = EvalSettings(shopsim_url=shop.url, server_url=sg.url, tokenizer_dir=str(world.tokenizer),
                                    concurrency=a.concurrency, slots=48, max_turns=a.max_turns,
                                    max_context_len=32000, max_response_len=256, skill_token_budget=1024,
                                    episode_retries=3, max_infra_share=0.05, reset_timeout_s=60.0,
                                    shopsim_ready_s=900.0).check()
            builder = load_builder(settings.tokenizer_dir)
            specs = [EpisodeSpec(id=f"bench-{i}", task=world.tasks[i % len(world.tasks)])
                     for i in range(a.episodes)]
            t0 = time.monotonic()
            res = asyncio.run(run_episodes(specs, settings, builder, Path(tmp) / "out", resume=False,
                                           label="bench"))
            wall = time.monotonic() - t0
        finally:
            stop(sg)
            stop(shop)
    t = res.timing
    turns = sum(r["turns"] for r in res.records.values()) / len(res.records)
    print(f"episodes {t['played']} at concurrency {t['in_flight']}, /generate latency {a.latency_ms:g} ms, "
          f"{turns:.2f} turns per episode")
    print(f"wall {t['wall_s']:.2f} s (with start-up {wall:.2f} s); throughput {t['episodes_per_s']:.2f} episodes/s")
    print(f"mean episode latency {t['episode_s_mean']:.3f} s (generate {t['generate_s_mean']:.3f} s, "
          f"interact {t['interact_s_mean']:.3f} s, slot wait {t['slot_wait_s_mean']:.3f} s)")
    print(f"concurrency bound {t['concurrency_bound_per_s']:.2f} episodes/s; ratio {t['ratio_to_bound']:.3f} "
          f"(target >= 0.95)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
