"""Benchmark: GPU-idle seconds per round, today's order against each cut of issue 29, in one run.

Each configuration is a rehearsal (ROUNDS=2) whose stand-ins wait as long as the real parts do
(DELAYS below: the real figure, its source, the stand-in knob that waits it), scaled by SCALE:
~5.5 min per configuration at the real 20 steps a round, ~1-2 min with --steps 2, on two cores
(28 min for all five at 20 steps).
The split is the one `make report` draws
(pyhelpers/run/gpu_time.py, from the run's events.jsonl). Prints, per configuration and round,
wall, busy and idle seconds with the idle phases, then the idle fraction of each configuration
against today's order as a ratio measured in this one run, and the same for the idle time between
the jobs (every idle phase but job-start: on this CPU machine a job's start is mostly Ray's and
Python's own start, which is not scaled and swamps the modelled delays):

    .venv/bin/python bench/round_gpu_idle.py --only today --only "cuts 4+5+6 and the analyst 4 at once"
    .venv/bin/python bench/round_gpu_idle.py --steps 2    # every configuration, short rounds (~8 min)

Seconds printed are the rehearsal's (scaled); divide by SCALE for the real-time equivalent. Each
round's line also prints what its phases add up to (the report's stacked bar) against its wall time.

What runs of it showed (2 cores, scale 1/60; a second or two moves between runs):

  --steps 20 (the default), every configuration in one run (28 min, 2026-12-05, main at 6cf791d):
    configuration                            idle s per round  idle fraction  x today's  between the jobs
    today                                    21.9              15.2%          1          13.0 s (783 s real)
    cut 4: val beside compile                20.3              14.1%          0.93       11.1 s (0.85 x)
    cuts 4+5: and JIT caches on the data disk 19.6             13.7%          0.90       11.3 s (0.86 x)
    cuts 4+5+6: and SAVE_HF=1                20.4              14.2%          0.93       11.5 s (0.88 x)
    cuts 4+5+6 and the analyst 4 at once     12.3               9.0%          0.59        3.4 s (0.26 x: 204 s real)
    Each round's bars = its wall time +0.00%. With the analyst one request at a time, compile-wait
    (its backlog draining, 9.1 s a round today) is what is left: cut 4 plays val inside it (7.5 s),
    cut 6 removes the export (1.1 s) but the drain it overlapped then shows as compile-wait (8.5 s);
    four requests in flight empty the backlog during training (compile-wait 0.1-0.3 s).
    Cut 5 shows no gain here: in round 0 slime's own engines fill the default caches (job-start
    11-12 s against 6 s in round 1, the JIT delay inside it), so the eval server finds them warm on
    one machine either way; it is for the first round after a migration or a fresh container.
  Earlier, today against every cut only (11 min): 15.4% -> 8.8% = 0.57 x.
  --steps 2, each cut on its own (2 min per configuration): cuts 4 and 5 leave the idle time at
    0.97-0.99 x; cut 6 removes the export (1.1 s) for 0.17 s more inside the job's save.

Not "about a minute": a rehearsal costs ~44 CPU-s (Ray's daemons, Python starts, the episodes
played) whatever SCALE is, so on 2 cores five two-round configurations take two minutes or more
even with no modelled delay, and a delay scaled further down than 1/60 is swamped by that
unscaled start (job-start below). --only and --steps 2 are the short runs.

The rest is job-start: 6-12 s of every round against 2-3 s of modelled delay -- Ray's and Python's
own start on this CPU, unscaled. A cut to it (the next round's job starting while the last one
evaluates, or one job across rounds) is not in this bench.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import rehearsal_run  # noqa: E402

from pyhelpers import stages  # noqa: E402
from pyhelpers.run import events, gpu_time  # noqa: E402


@dataclass(frozen=True)
class Delay:
    real_s: float  # the real part's time, seconds, for Qwen3.5-4B on 4 A800s
    knob: str  # the stand-in's test-only variable that waits it (tests/fakes/README.md)
    source: str


# THE table: one row per real part that keeps the GPUs waiting. "estimate" where no published
# figure for this model size exists; the source then says what the estimate rests on.
DELAYS = {
    "megatron-start": Delay(90, "FAKE_SLIME_START_DELAY",
                            "estimate: Megatron init + torch_dist load of an 8.4 GB weights-only checkpoint "
                            "(architecture §7) at ~0.1-0.2 GB/s per rank with process-group setup"),
    "sglang-start": Delay(30, "FAKE_SGLANG_START_DELAY",
                          "estimate: 8.4 GB weights load + CUDA graph capture (12 s for a main model: "
                          "github.com/sgl-project/sglang/issues/10088; SGLang logs 'This can take up to several "
                          "minutes': issues/4007)"),
    "jit-cold": Delay(60, "FAKE_SGLANG_JIT_DELAY",
                      "estimate: FlashInfer/Triton JIT of a dense model's kernels on a cold cache (one uncached "
                      "FlashInfer kernel took 678 s on an H200: github.com/sgl-project/sglang-omni/issues/1194)"),
    "step": Delay(250, "FAKE_SLIME_STEP_DELAY",
                  "estimate: README's example progress line (step 4:10) for 32 episodes x 8 turns"),
    "save": Delay(10, "FAKE_SLIME_SAVE_DELAY", "estimate: 8.4 GB weights-only torch_dist save at ~1 GB/s"),
    "save-hf": Delay(10, "FAKE_SLIME_SAVE_HF_DELAY",
                     "estimate: the same 8.4 GB written again as HF safetensors by --save-hf (SAVE_HF=1 only)"),
    "teardown": Delay(15, "FAKE_SLIME_EXIT_DELAY",
                      "estimate: slime's engines and Ray actors stopped, the job's driver exits"),
    "convert": Delay(60, "FAKE_CONVERT_DELAY",
                     "estimate, scaled from 107 s load+convert+save of Qwen3-30B-A3B "
                     "(github.com/NVIDIA-NeMo/Megatron-Bridge/issues/1752) to a 4B dense model"),
    "analyst-request": Delay(60, "FAKE_ANALYST_DELAY_S",
                             "estimate: one DashScope qwen-plus answer to a spool record's whole episode "
                             "(ANALYST_TIMEOUT's default allows 120 s)"),
    "eval-turn-ms": Delay(800, "FAKE_SGLANG_LATENCY_MS", "estimate: one policy turn (~200 tokens decoded), ms"),
}
SCALE = 1 / 60  # rehearsal seconds per real second

# Today's order, then each cut (its knobs); every configuration runs with the same delays.
CONFIGS = {
    "today": {"VAL_BESIDE_COMPILE": "0", "JIT_CACHE_ON_DATA_DISK": "0", "ANALYST_CONCURRENCY": "1"},
    "cut 4: val beside compile": {"VAL_BESIDE_COMPILE": "1", "JIT_CACHE_ON_DATA_DISK": "0", "ANALYST_CONCURRENCY": "1"},
    "cuts 4+5: and JIT caches on the data disk": {"VAL_BESIDE_COMPILE": "1", "JIT_CACHE_ON_DATA_DISK": "1",
                                                  "ANALYST_CONCURRENCY": "1"},
    "cuts 4+5+6: and SAVE_HF=1": {"VAL_BESIDE_COMPILE": "1", "JIT_CACHE_ON_DATA_DISK": "1", "SAVE_HF": "1",
                                  "ANALYST_CONCURRENCY": "1"},
    "cuts 4+5+6 and the analyst 4 at once": {"VAL_BESIDE_COMPILE": "1", "JIT_CACHE_ON_DATA_DISK": "1", "SAVE_HF": "1",
                                             "ANALYST_CONCURRENCY": "4"},
}


# The analyst's real limits (env/defaults.env) and the episodes they apply to. A step of the
# rehearsal plays REHEARSAL_EPISODES where a real one plays REAL_EPISODES: records per request
# shrink by that ratio so a step yields the real number of requests (each waiting the real
# analyst-request time, scaled), and the round's cap follows the rehearsal's steps per round.
REAL_EPISODES, REHEARSAL_EPISODES = 16 * 8, 4 * 4  # ROLLOUT_GROUPS x SAMPLES_PER_GROUP
REAL_STEPS = 20  # STEPS_PER_ROUND: a round's busy time against its idle time is the real one
ANALYST = {"ANALYST_BATCH_SIZE": 8, "ANALYST_MAX_RPM": 30, "ANALYST_MAX_CALLS": 200, "ANALYST_DRAIN_TIMEOUT": 600}


def analyst_env(scale: float, steps: int) -> dict[str, str]:
    return {"ANALYST_BATCH_SIZE": str(max(1, round(ANALYST["ANALYST_BATCH_SIZE"] * REHEARSAL_EPISODES / REAL_EPISODES))),
            "ANALYST_MAX_RPM": str(round(ANALYST["ANALYST_MAX_RPM"] / scale)),
            "ANALYST_MAX_CALLS": str(max(1, round(ANALYST["ANALYST_MAX_CALLS"] * steps / REAL_STEPS))),
            "ANALYST_DRAIN_TIMEOUT": f"{ANALYST['ANALYST_DRAIN_TIMEOUT'] * scale:.3f}"}


def delay_env(scale: float) -> dict[str, str]:
    return {d.knob: f"{d.real_s * scale:.3f}" if not d.knob.endswith("_MS") else f"{d.real_s * scale:.1f}"
            for d in DELAYS.values()}


def rehearse(name: str, knobs: dict[str, str], scale: float, steps: int, tmp: Path) -> Path:
    # A fresh home: the programs' default caches (~/.cache/...) start as cold as the data disk's.
    (tmp / "home").mkdir()
    return rehearsal_run.rehearse(name, tmp, ROUNDS="2", STEPS_PER_ROUND=str(steps), HOME=str(tmp / "home"),
                                  **analyst_env(scale, steps),
                                  **delay_env(scale), **knobs)


def show(name: str, rounds: list[gpu_time.RoundTime]) -> None:
    print(f"{name}:")
    for rt in rounds:
        phases = ", ".join(f"{p} {rt.seconds[p]:.1f}" for p in gpu_time.IDLE if rt.seconds[p] >= 0.05)
        bars = sum(rt.seconds.values())  # what the report's stacked bar adds up to
        print(f"  round {rt.round}: wall {rt.wall_s:6.1f} s  busy {rt.busy_s:6.1f}  idle {rt.idle_s:6.1f} "
              f"({100 * rt.idle_frac:4.1f}%)  bars {bars:6.1f} s = wall {100 * (bars / rt.wall_s - 1):+.2f}%  "
              f"[{phases}]")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=SCALE, help="rehearsal seconds per real second")
    ap.add_argument("--only", choices=list(CONFIGS), action="append", help="run only these configurations")
    ap.add_argument("--steps", type=int, default=REAL_STEPS,
                    help="steps per round (the real 20 by default: fewer make a round's busy share smaller than a "
                         "real round's, so the same idle seconds are a larger fraction)")
    args = ap.parse_args()
    print(f"delays (real s -> rehearsal s at scale {args.scale:g}):")
    for name, d in DELAYS.items():
        print(f"  {name:<16}{d.real_s:>7g} -> {d.real_s * args.scale:6.2f}  {d.knob}")
    results: dict[str, list[gpu_time.RoundTime]] = {}
    for name, knobs in CONFIGS.items():
        if args.only and name not in args.only:
            continue
        run_dir = rehearse(name, knobs, args.scale, args.steps, Path(tempfile.mkdtemp(prefix="round-gpu-idle-")))
        evs = events.read(run_dir)
        results[name] = [rt for rt in gpu_time.split(evs, stages.GPU_ROLES) if rt.finished]
        converted = sum(1 for e in evs if e["kind"] == "convert-start")
        print(f"    exports: {converted} by the converter, {len(results[name]) - converted} from --save-hf", flush=True)
    base = None
    for name, rounds in results.items():
        show(name, rounds)
        frac = gpu_time.run_idle_frac(rounds)
        idle = sum(rt.idle_s for rt in rounds) / len(rounds)
        # Between the jobs: every idle phase but job-start, whose time here is mostly Ray's and
        # Python's start on the CPU (not scaled), and which no cut of this bench changes.
        between = sum(rt.idle_s - rt.seconds["job-start"] for rt in rounds) / len(rounds)
        if base is None:
            base = (frac, idle, between)
            print(f"  idle fraction {100 * frac:.1f}%; idle {idle:.1f} s per round, {between:.1f} s of it between "
                  "the jobs")
        else:
            print(f"  idle fraction {100 * frac:.1f}% = {frac / base[0]:.2f} x today's; idle {idle:.1f} s per round "
                  f"= {idle / base[1]:.2f} x; between the jobs {between:.1f} s = {between / base[2]:.2f} x today's "
                  f"(real: {between / args.scale:.0f} s against {base[2] / args.scale:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
