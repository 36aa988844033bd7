"""Benchmark: a rollout step's wall time with full-skill retries in the background vs awaited inline.

Starts the fakes of tests/ (ShopSimulator, the SGLang engine behind the router with a fixed delay
per /generate standing in for generation time) and runs slime's rollout loop (the stand-in of
tests/fakes/slime_stub: over-sample --over groups of --group, keep the first --keep to finish,
abort the rest) through the plugin's rollout function, twice: "background" is the plugin as
shipped (a failed Sample returns at once, its retry runs beside the step on a spare slot; at the
end of the step queued retries give up and running ones are awaited); "inline" awaits each failed
Sample's retry before the Sample returns, so its group finishes later. Prints the step time,
training episodes and retries of each.

    .venv/bin/python bench/rollout_retry.py [--keep 4] [--over 8] [--group 4] [--concurrency 8]
        [--spare 8] [--latency 0.05] [--fail-share 0.6]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "fakes" / "slime_stub")]

from fakes.shop_fixture import write_shop_fixture  # noqa: E402
from slime.rollout.base_types import call_rollout_fn  # noqa: E402
from slime.rollout.data_source import RolloutDataSourceWithBuffer  # noqa: E402
from slime.rollout.sample_hooks import set_current_rollout_id  # noqa: E402
from support.rollout_stack import Stack  # noqa: E402
from support.skillbank import bank_of  # noqa: E402
from support.tokenizer import build_tokenizer  # noqa: E402

from pyhelpers.rollout import metrics  # noqa: E402
from pyhelpers.rollout.generate import generate  # noqa: E402
from pyhelpers.rollout.rollout import generate_rollout  # noqa: E402
from pyhelpers.skills.bank import write_bank  # noqa: E402


async def generate_inline(args, sample, sampling_params):
    """The alternative: await this Sample's retry before handing the Sample back to slime."""
    sample = await generate(args, sample, sampling_params)
    step = metrics.current(None)
    await asyncio.gather(*[t for t in step.tasks if t.get_name().endswith(f"-i{sample.index}")])
    return sample


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", type=int, default=4)
    ap.add_argument("--over", type=int, default=8)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--spare", type=int, default=8)
    ap.add_argument("--latency", type=float, default=0.05, help="seconds per /generate")
    ap.add_argument("--fail-share", type=float, default=0.6)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        fx = write_shop_fixture(tmp / "shop", n_tasks=16, n_eval=0, base_success=1 - a.fail_share)
        st = Stack(tmp, slots=a.concurrency + a.spare, fixture=fx, tokenizer=build_tokenizer(tmp / "tok"),
                   slow_share=1.0, slow_s=a.latency)
        try:
            bank = tmp / "skillbank.json"
            write_bank(bank, bank_of([("搜索结果很多时", "先核对类别再点击"), ("选择规格时", "先选颜色再购买")],
                                     ["active", "candidate"]))
            results = {}
            for n, mode in enumerate(("warm-up", "background", "inline")):  # warm-up: tokenizer, connections
                args = st.args(tmp / f"round-{mode}", bank_path=bank, concurrency=a.concurrency,
                               rollout_max_context_len=16384, yaml_extra={"rollout_max_context_len": 16384},
                               rollout_batch_size=a.keep, over_sampling_batch_size=a.over,
                               n_samples_per_prompt=a.group, dynamic_sampling_filter_path=None)
                if mode == "inline":
                    args.custom_generate_function_path = "__main__.generate_inline"
                set_current_rollout_id(n)
                t0 = time.monotonic()
                out = call_rollout_fn(generate_rollout, args, n, RolloutDataSourceWithBuffer(args), evaluation=False)
                kept = [x.metadata["shopsim"]["success"] for g in out.samples for x in g]
                results[mode] = (time.monotonic() - t0, out.metrics, sum(kept) / len(kept))
        finally:
            st.close()
    results.pop("warm-up")
    for mode, (took, fig, kept) in results.items():
        played = fig["rollout/shopsim/episodes"] - fig["rollout/shopsim/termination/aborted"]
        print(f"{mode:10s} step {took:6.2f} s; training episodes played {played:.0f} "
              f"(aborted {fig['rollout/shopsim/termination/aborted']:.0f}); failures "
              f"{fig['rollout/shopsim/failures']:.0f}, retries {fig['rollout/shopsim/retries']:.0f}, "
              f"skipped {fig['rollout/shopsim/retry_skipped']:.0f}; kept batch success {kept:.2f} "
              f"(all played: {fig['rollout/shopsim/success_rate']:.2f})")
    print(f"inline / background step time: {results['inline'][0] / results['background'][0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
