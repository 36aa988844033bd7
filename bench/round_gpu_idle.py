"""Benchmark: GPU-idle seconds per round, today's order against each cut of issue 29, in one run.

Each configuration is a rehearsal (ROUNDS=2) whose stand-ins wait as long as the real parts do
(DELAYS below: the real figure, its source, the stand-in knob that waits it), scaled by SCALE.
A round is as long as a real one: 20 steps, played as PLAYED_STEPS steps that each stand for
five (STRETCHED: the same busy time and analyst work, a fifth of the episodes to play). The five
configurations run at once (run_all: STAGGER_S apart): about 5 minutes on two cores;
--one-at-a-time runs them one after the other, each on an otherwise idle machine (about 20
minutes: today's order alone took 3:56).
The split is the one `make report` draws (pyhelpers/run/gpu_time.py, from the run's
events.jsonl). Prints, per configuration and round, wall, busy and idle seconds with the idle
phases and what they add up to (the report's stacked bar) against the wall time; then for each
configuration against today's order, as ratios measured in this one run: the idle fraction of
the two rounds, the idle seconds per round, the idle time between the jobs (every idle phase but
job-start: on this CPU machine a job's start is mostly Ray's and Python's own start, which is not
scaled and swamps the modelled delays), and the idle fraction of a five-round run (five_rounds:
round 0 once, round 1 four times, as a real run's rounds 1-4 are alike).

    .venv/bin/python bench/round_gpu_idle.py                  # every configuration at once (~5 min)
    .venv/bin/python bench/round_gpu_idle.py --only today --only "cuts 4+5+6 and the analyst 4 at once"
    .venv/bin/python bench/round_gpu_idle.py --one-at-a-time  # each alone (~20 min)

Seconds printed are the rehearsal's (scaled); divide by SCALE for the real-time equivalent.

What runs of it showed (2 cores, scale 1/60; a second or two moves between runs):

  The default, every configuration at once (5:00, 2026-12-05):
    configuration                            idle s per round  idle fraction  x today's  five-round run  between the jobs
    today                                    23.4              19.5%          1          19.7%           13.0 s (779 s real)
    cut 4: val beside compile                22.0              18.7%          0.96       17.8% (0.90 x)  11.8 s (0.91 x)
    cuts 4+5: and JIT caches on the data disk 22.1             18.8%          0.96       17.1% (0.87 x)  11.6 s (0.89 x)
    cuts 4+5+6: and SAVE_HF=1                25.4              21.1%          1.08       19.0% (0.96 x)  11.7 s (0.90 x)
    cuts 4+5+6 and the analyst 4 at once     13.6              12.4%          0.64       11.4% (0.58 x)   4.0 s (0.31 x: 241 s real)
  Each round's bars = its wall time +0.00%. Round 0's job-start moves by several seconds with
  what the other configurations do while it starts (run_all; above, the last one started, SAVE_HF
  =1, 19.3 s against 10.5 s), so over five runs of all five at once every cut's two-round idle
  fraction moved between 0.64 and 0.77 x today's, its five-round run's between 0.58 and 0.64 x.

  --one-at-a-time with 20 played steps (before STRETCHED; 28 min, 2026-12-05, main at 6cf791d):
    configuration                            idle s per round  idle fraction  x today's  between the jobs
    today                                    21.9              15.2%          1          13.0 s (783 s real)
    cut 4: val beside compile                20.3              14.1%          0.93       11.1 s (0.85 x)
    cuts 4+5: and JIT caches on the data disk 19.6             13.7%          0.90       11.3 s (0.86 x)
    cuts 4+5+6: and SAVE_HF=1                20.4              14.2%          0.93       11.5 s (0.88 x)
    cuts 4+5+6 and the analyst 4 at once     12.3               9.0%          0.59        3.4 s (0.26 x: 204 s real)

  In both: with the analyst one request at a time, compile-wait (its backlog draining, 9 s a
  round today, ANALYST_DRAIN_TIMEOUT's 600 s scaled) is what is left: cut 4 plays val inside it
  (7 s left), cut 6 removes the export (1.1 s) but the drain it overlapped then shows as
  compile-wait (8.5 s); four requests in flight empty the backlog during training (compile-wait
  0.1-0.3 s). Cut 5 shows no gain here: in round 0 slime's own engines fill the default caches,
  so the eval server finds them warm on one machine either way; it is for the first round after
  a migration or a fresh container.

Not "about a minute": a rehearsal costs ~40 CPU-s (Ray's daemons, Python starts, the episodes
played) whatever SCALE is, so on 2 cores five two-round configurations take two minutes or more
even with no modelled delay; a round is no shorter than its scaled busy time (20 x 250 s at
1/60 = 83 s), while a delay scaled further down than 1/60 is swamped by the unscaled start
(job-start). --only gives the short runs.

The rest is job-start: 7-12 s of every round against 2-3 s of modelled delay -- Ray's and Python's
own start on this CPU, unscaled. A cut to it (the next round's job starting while the last one
evaluates, or one job across rounds) is not in this bench.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
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
STAGGER_S = 12  # seconds between two configurations' starts when they run at once (run_all)
PLAYED_STEPS = 4  # steps a bench round plays, each standing for REAL_STEPS / PLAYED_STEPS (STRETCHED)
ANALYST = {"ANALYST_BATCH_SIZE": 8, "ANALYST_MAX_RPM": 30, "ANALYST_MAX_CALLS": 200, "ANALYST_DRAIN_TIMEOUT": 600}


# A played step stands for `per` real steps (played = steps / per): its delay and its analyst
# requests' answers last `per` times the real ones, so a round's busy time and its analyst work
# are the real round's, with `per` times fewer episodes played and records spooled (CPU: the
# episodes are the part of a rehearsal that grows with its steps). The analyst's backlog arrives
# in coarser bursts; the compile-wait it leaves is the same drain (ANALYST_DRAIN_TIMEOUT caps it).
STRETCHED = ("step", "analyst-request")


def analyst_env(scale: float, played: int) -> dict[str, str]:
    return {"ANALYST_BATCH_SIZE": str(max(1, round(ANALYST["ANALYST_BATCH_SIZE"] * REHEARSAL_EPISODES / REAL_EPISODES))),
            "ANALYST_MAX_RPM": str(round(ANALYST["ANALYST_MAX_RPM"] / scale)),
            "ANALYST_MAX_CALLS": str(max(1, round(ANALYST["ANALYST_MAX_CALLS"] * played / REAL_STEPS))),
            "ANALYST_DRAIN_TIMEOUT": f"{ANALYST['ANALYST_DRAIN_TIMEOUT'] * scale:.3f}"}


def delay_env(scale: float, per: float = 1.0) -> dict[str, str]:
    def wait(name: str, d: Delay) -> float:
        return d.real_s * scale * (per if name in STRETCHED else 1)
    return {d.knob: f"{wait(n, d):.3f}" if not d.knob.endswith("_MS") else f"{wait(n, d):.1f}"
            for n, d in DELAYS.items()}


def rehearse(name: str, knobs: dict[str, str], scale: float, steps: int, played: int, tmp: Path) -> Path:
    # A fresh home: the programs' default caches (~/.cache/...) start as cold as the data disk's.
    (tmp / "home").mkdir()
    return rehearsal_run.rehearse(name, tmp, ROUNDS="2", STEPS_PER_ROUND=str(played), HOME=str(tmp / "home"),
                                  **analyst_env(scale, played),
                                  **delay_env(scale, steps / played), **knobs)


def run_all(names: list[str], scale: float, steps: int, played: int, at_once: bool) -> dict[str, Path]:
    """Each configuration's run directory. At once (the default): every configuration in its own
    thread, so the bench takes about one configuration's time. Their starts are STAGGER_S apart: a
    rehearsal's first seconds (preflight, Ray's head, ShopSimulator, the first job's Python and
    Ray workers) are its CPU-heaviest, and five of them at once on two cores tripled round 0's
    job-start (30-36 s against 10.6 s alone). The two ends of the comparison (today's order and
    every cut) start first, alike; a configuration started later meets the others' evaluation
    and its round 0 job-start grows by up to 6 s (seen: the last one started, 16-17 s)."""
    def one(name: str) -> Path:
        time.sleep(order.index(name) * STAGGER_S if at_once else 0)
        return rehearse(name, CONFIGS[name], scale, steps, played, Path(tempfile.mkdtemp(prefix="round-gpu-idle-")))
    order = names[:1] + names[-1:] + names[1:-1] if len(names) > 2 else names
    if not at_once:
        return {name: one(name) for name in names}
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        return dict(zip(names, pool.map(one, names), strict=True))


def five_rounds(rounds: list[gpu_time.RoundTime]) -> list[gpu_time.RoundTime]:
    """A real run's five rounds from the bench's two: round 0 (the run's one-time starts, cold
    caches) once, round 1 (a round after another, as rounds 1-4 are) four times."""
    return rounds[:1] + rounds[1:2] * 4 if len(rounds) >= 2 else rounds


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
                    help="real steps per round (the real 20 by default: fewer make a round's busy share smaller than "
                         "a real round's, so the same idle seconds are a larger fraction)")
    ap.add_argument("--played", type=int, default=PLAYED_STEPS,
                    help="steps the rehearsal plays per round, each standing for steps/played real ones (STRETCHED)")
    ap.add_argument("--one-at-a-time", action="store_true",
                    help="run the configurations one after the other (each on an otherwise idle machine)")
    args = ap.parse_args()
    if not 1 <= args.played <= args.steps:
        ap.error(f"--played {args.played} must be between 1 and --steps {args.steps}")
    per = args.steps / args.played
    print(f"delays (real s -> rehearsal s at scale {args.scale:g}; {args.played} played steps a round, "
          f"each for {per:g} real):")
    waits = delay_env(args.scale, per)
    for name, d in DELAYS.items():
        print(f"  {name:<16}{d.real_s:>7g} -> {float(waits[d.knob]):6.2f}  {d.knob}"
              + (f" (x{per:g})" if name in STRETCHED and per != 1 else ""))
    names = [n for n in CONFIGS if not args.only or n in args.only]
    results: dict[str, list[gpu_time.RoundTime]] = {}
    for name, run_dir in run_all(names, args.scale, args.steps, args.played, not args.one_at_a_time).items():
        evs = events.read(run_dir)
        results[name] = [rt for rt in gpu_time.split(evs, stages.GPU_ROLES) if rt.finished]
        converted = sum(1 for e in evs if e["kind"] == "convert-start")
        print(f"  {name}: exports: {converted} by the converter, {len(results[name]) - converted} from --save-hf",
              flush=True)
    base = None
    for name, rounds in results.items():
        show(name, rounds)
        frac = gpu_time.run_idle_frac(rounds)
        run5 = gpu_time.run_idle_frac(five_rounds(rounds))
        idle = sum(rt.idle_s for rt in rounds) / len(rounds)
        # Between the jobs: every idle phase but job-start, whose time here is mostly Ray's and
        # Python's start on the CPU (not scaled), and which no cut of this bench changes.
        between = sum(rt.idle_s - rt.seconds["job-start"] for rt in rounds) / len(rounds)
        if base is None:
            base = (frac, idle, between, run5)
            print(f"  idle fraction {100 * frac:.1f}%; idle {idle:.1f} s per round, {between:.1f} s of it between "
                  f"the jobs; a five-round run: {100 * run5:.1f}%")
        else:
            print(f"  idle fraction {100 * frac:.1f}% = {frac / base[0]:.2f} x today's; idle {idle:.1f} s per round "
                  f"= {idle / base[1]:.2f} x; between the jobs {between:.1f} s = {between / base[2]:.2f} x today's "
                  f"(real: {between / args.scale:.0f} s against {base[2] / args.scale:.0f} s); a five-round run: "
                  f"{100 * run5:.1f}% = {run5 / base[3]:.2f} x today's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
