"""Benchmark: a five-round run's GPU-idle fraction in modelled seconds, today's order against each cut of that idle time.

Each configuration is a rehearsal (ROUNDS=2) whose stand-ins wait as long as the real parts do
(DELAYS below: the real figure, its source, the stand-in knob that waits it), scaled by SCALE.
A round is as long as a real one: 20 steps, played as PLAYED_STEPS steps that each stand for
five (STRETCHED: the same busy time and analyst work, a fifth of the episodes to play).
The figures are modelled seconds (docs/gpu_idle_bench.md): every stand-in records each wait with
the real seconds it stands for (tests/fakes/modelled_wait.py), and the run's events are read on a
clock on which a wait lasts those and everything else -- the toolkit's own time, its services'
starts -- lasts what it lasted, unscaled, but for the job's own start and teardown, which are the
table's figures alone (bench/modelled_time.py); where val plays beside compile, on a
clock per activity (val on the eval server's waits, compile on the analyst's, the window the
longer of the two). Compile's wait for the analyst is its queue played on the modelled clock
(bench/analyst_queue.py), not the answers it had left in wall time. Multiplying the wall time back
by 60, as this bench did, multiplied this CPU's time too and the verdict moved with the machine's load.
The split is the one `make report` draws (pyhelpers/run/gpu_time.py) of those events. A five-round
run is round 0 once and round 1 four times (a real run's rounds 1-4 are alike). A configuration
DERIVED from another's run is read off that run, not rehearsed (cut 5 on one machine).
A failed attempt the run healed from (Ray's start timing out on an overloaded CPU) is this
machine's, not the configuration's: it is dropped from the timeline and counted in the output.

    .venv/bin/python bench/round_gpu_idle.py                  # the configurations at once
    .venv/bin/python bench/round_gpu_idle.py --json           # only the JSON on stdout
    .venv/bin/python bench/round_gpu_idle.py --only today --only "cuts 4+5+6 and the analyst 4 at once"
    .venv/bin/python bench/round_gpu_idle.py --one-at-a-time  # each alone

What runs of it showed: docs/gpu_idle_bench.md (a quiet run and one beside two CPU hogs).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import analyst_queue  # noqa: E402
import modelled_time  # noqa: E402
import rehearsal_run  # noqa: E402

from pyhelpers import stages  # noqa: E402
from pyhelpers.run import events, gpu_time  # noqa: E402


@dataclass(frozen=True)
class Delay:
    real_s: float  # the real part's time, seconds, for Qwen3.5-4B on 4 A800s
    knob: str  # the stand-in's test-only variable that waits it (tests/fakes/README.md)
    source: str


ANALYST_KNOB = "FAKE_ANALYST_DELAY_S"

# THE table: one row per real part that keeps the GPUs waiting. "estimate" where no published
# figure for this model size exists; the source then says what the estimate rests on. Where a real
# 4xA800 run shows each figure, and what `make smoke` prints of it: docs/gpu_idle_bench.md.
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
    "analyst-request": Delay(60, ANALYST_KNOB,
                             "estimate: one DashScope qwen-plus answer to a spool record's whole episode "
                             "(ANALYST_TIMEOUT's default allows 120 s)"),
    "eval-turn-ms": Delay(800, "FAKE_SGLANG_LATENCY_MS", "estimate: one policy turn (~200 tokens decoded), ms"),
}
SCALE = 1 / 60  # rehearsal seconds per real second

# Today's order (the round-by-round one, ONE_JOB=0: the default before the one-job mode), then each
# cut (its knobs); every configuration runs with the same delays.
CONFIGS = {
    "today": {"ONE_JOB": "0", "VAL_BESIDE_COMPILE": "0", "JIT_CACHE_ON_DATA_DISK": "0", "ANALYST_CONCURRENCY": "1"},
    "cut 4: val beside compile": {"ONE_JOB": "0", "VAL_BESIDE_COMPILE": "1", "JIT_CACHE_ON_DATA_DISK": "0", "ANALYST_CONCURRENCY": "1"},
    "cuts 4+5: and JIT caches on the data disk": {"ONE_JOB": "0", "VAL_BESIDE_COMPILE": "1", "JIT_CACHE_ON_DATA_DISK": "1",
                                                  "ANALYST_CONCURRENCY": "1"},
    "cuts 4+5+6: and SAVE_HF=1": {"ONE_JOB": "0", "VAL_BESIDE_COMPILE": "1", "JIT_CACHE_ON_DATA_DISK": "1", "SAVE_HF": "1",
                                  "ANALYST_CONCURRENCY": "1"},
    "cuts 4+5+6 and the analyst 4 at once": {"ONE_JOB": "0", "VAL_BESIDE_COMPILE": "1", "JIT_CACHE_ON_DATA_DISK": "1", "SAVE_HF": "1",
                                             "ANALYST_CONCURRENCY": "4"},
    # one slime job for the run (docs/one-job-mode.md): the best cuts but SAVE_HF (it exports on the CPU)
    "one-job": {"ONE_JOB": "1", "VAL_BESIDE_COMPILE": "1", "JIT_CACHE_ON_DATA_DISK": "1", "ANALYST_CONCURRENCY": "4"},
}


# The analyst's real limits (env/defaults.env) and the episodes they apply to. A step of the
# rehearsal plays REHEARSAL_EPISODES where a real one plays REAL_EPISODES: records per request
# shrink by that ratio so a step yields the real number of requests (each waiting the real
# analyst-request time, scaled), and the round's cap follows the rehearsal's steps per round.
REAL_EPISODES, REHEARSAL_EPISODES = 16 * 8, 4 * 4  # ROLLOUT_GROUPS x SAMPLES_PER_GROUP
REAL_STEPS = 20  # STEPS_PER_ROUND: a round's busy time against its idle time is the real one
# Seconds between two configurations' starts when they run at once (run_all): a rehearsal's first
# minute (preflight, Ray's head) is its CPU-heaviest. 12 s apart, at a load of 20-30 on 2 cores,
# Ray's heads of two configurations timed out starting, one twice (the run stopped).
STAGGER_S = 45
PLAYED_STEPS = 4  # steps a bench round plays, each standing for REAL_STEPS / PLAYED_STEPS (STRETCHED)
WAITS = "waits.jsonl"  # in a configuration's temporary directory: its stand-ins' waits (FAKE_WAIT_LOG)
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
    # The stand-ins record every wait in modelled seconds (tests/fakes/modelled_wait.py) in tmp.
    (tmp / "home").mkdir()
    return rehearsal_run.rehearse(name, tmp, ROUNDS="2", STEPS_PER_ROUND=str(played), HOME=str(tmp / "home"),
                                  FAKE_WAIT_LOG=str(tmp / WAITS), FAKE_WAIT_SCALE=f"{scale!r}",
                                  **analyst_env(scale, played),
                                  **delay_env(scale, steps / played), **knobs)


def run_all(names: list[str], scale: float, steps: int, played: int, at_once: bool) -> dict[str, Path]:
    """Each configuration's temporary directory (its run under runs/rehearsal, its waits in WAITS).
    At once (the default): every configuration in its own thread, so the bench takes about one
    configuration's time; their starts STAGGER_S apart (a rehearsal's first seconds are its
    CPU-heaviest). Load no longer moves the figures much (modelled seconds), only the bench's time."""
    def one(name: str) -> Path:
        time.sleep(order.index(name) * STAGGER_S if at_once else 0)
        for attempt in (1, 2):  # a rehearsal that stopped (Ray's start timing out under load) runs once more
            tmp = Path(tempfile.mkdtemp(prefix="round-gpu-idle-"))
            try:
                rehearse(name, CONFIGS[name], scale, steps, played, tmp)
                return tmp
            except SystemExit as failed:
                if attempt == 2:
                    raise
                print(f"  {name}: {str(failed.code).splitlines()[0]}; once more", flush=True)
        raise AssertionError("unreachable")
    order = names[:1] + names[-1:] + names[1:-1] if len(names) > 2 else names
    if not at_once or not names:
        return {name: one(name) for name in names}
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        return dict(zip(names, pool.map(one, names), strict=True))


def val_ended(e: dict) -> bool:
    """Bare val's end: evaluate waits for compile (the gate needs compiled.json) right after it
    (pyhelpers/stages/eval_session.py: play_val, then loop.wait_beside)."""
    return e.get("kind") == "episodes" and e.get("what") == "val"


def never(_e: dict) -> bool:
    return False


def in_job_val(evs: list[dict]) -> list[tuple[float, float, object]]:
    """(start, end, round) of each bare val the job's eval hook played (the one-job mode): a val
    that began before its round's evaluate stage did (the evaluate stage's own starts after it)."""
    evaluates = {r: a for a, _b, r in modelled_time.stage_windows(evs, stages.GPU_ROLES.server)}
    out = []
    for e in evs:
        if val_ended(e) and isinstance(e.get("seconds"), (int, float)):
            a = float(e["t"]) - float(e["seconds"])
            if a < evaluates.get(e.get("round"), float("inf")):
                out.append((a, float(e["t"]), e.get("round")))
    return out


def modelled_rounds(tmp: Path) -> tuple[list[gpu_time.RoundTime], list[dict], int]:
    """The finished rounds of one bench rehearsal in modelled seconds (the report's split of its
    events on the modelled clocks: bench/modelled_time.py), the waits the stand-ins recorded, and
    how many failed attempts the run healed from (dropped from its timeline: modelled_time.restarts).
    The analyst's answers count only inside the stage that waits for its drain (compile), as long
    as its queue played on the modelled clock leaves it (analyst_queue); where evaluate runs
    beside it (VAL_BESIDE_COMPILE=1) each is read on its own clock."""
    evs = events.read(tmp / "runs" / "rehearsal")
    dropped = modelled_time.restarts(evs)
    evs = modelled_time.without(evs, dropped)
    [drain] = [s for s, p in stages.GPU_ROLES.whole.items() if p == "compile-wait"]
    waits = modelled_time.read_waits(tmp / WAITS)
    evs = modelled_time.steps_end_by_the_save(evs, waits, save=DELAYS["save"].knob)
    origin = float(evs[0]["t"])
    # the job's start and teardown: the delay table's figures alone (modelled_time.job_gaps)
    unmodelled = dropped + modelled_time.job_gaps(evs, waits, skip=ANALYST_KNOB)
    queued = analyst_queue.played(tmp / "runs" / "rehearsal", evs, waits, origin=origin, dropped=unmodelled,
                                  knob=ANALYST_KNOB, job=stages.GPU_ROLES.job, drain=drain)
    [export] = [s for s, p in stages.GPU_ROLES.whole.items() if p == "hf-export"]
    beside = stages.get(drain).beside
    pairs = [  # the one-job mode's export and drain beside the job's own val (every other event then
        # is the loop's, its train stage's end among them); val beside the drain (VAL_BESIDE_COMPILE=1)
        modelled_time.Pair((export, drain), (DELAYS["convert"].knob, ANALYST_KNOB), in_job_val, never,
                           drains=lambda e: not val_ended(e)),
        modelled_time.Pair((drain,), (ANALYST_KNOB,), lambda evs: modelled_time.stage_windows(evs, beside), val_ended),
    ]
    timed = modelled_time.timeline(evs, queued, origin=origin, dropped=unmodelled, inside=(ANALYST_KNOB, drain),
                                   pairs=pairs)
    rounds = [rt for rt in gpu_time.split(timed, stages.GPU_ROLES) if rt.finished]
    return rounds, waits, len(dropped)


def jit_paid_once_in_round_0(tmp: Path, rounds: list[gpu_time.RoundTime], waits: list[dict]) -> str | None:
    """Why cut 5 cannot be read off this run, or None: it changes where the JIT caches live, not
    which start finds them cold, when every start of the run shares one machine and one home --
    then round 0's job pays the one cold start either way and every later start is warm."""
    jit = [w for w in waits if w["knob"] == DELAYS["jit-cold"].knob]
    evs = events.read(tmp / "runs" / "rehearsal")
    round1 = min((float(e["t"]) for e in evs if e.get("round") == 1 and e.get("kind") == "stage-start"),
                 default=None)
    if len(jit) != 1 or round1 is None or float(jit[0]["start"]) >= round1:
        return f"{len(jit)} cold JIT wait(s), not one in round 0"
    return None


# Configurations read off another's run rather than rehearsed: name -> (the run, the check that
# the cut cannot change it there, returning why not or None).
DERIVED = {"cuts 4+5: and JIT caches on the data disk": ("cut 4: val beside compile", jit_paid_once_in_round_0)}


def five_rounds(rounds: list[gpu_time.RoundTime]) -> list[gpu_time.RoundTime]:
    """A real run's five rounds from the bench's two: round 0 (the run's one-time starts, cold
    caches) once, round 1 (a round after another, as rounds 1-4 are) four times."""
    return rounds[:1] + rounds[1:2] * 4 if len(rounds) >= 2 else rounds


def show(name: str, rounds: list[gpu_time.RoundTime], out) -> None:
    print(f"{name}:", file=out)
    for rt in rounds:
        phases = ", ".join(f"{p} {rt.seconds[p]:.0f}" for p in gpu_time.IDLE if rt.seconds[p] >= 0.5)
        print(f"  round {rt.round}: wall {rt.wall_s:7.0f} s  busy {rt.busy_s:7.0f}  idle {rt.idle_s:6.0f} "
              f"({100 * rt.idle_frac:4.1f}%)  [{phases}]", file=out)


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
    ap.add_argument("--rehearse-all", action="store_true",
                    help="rehearse the configurations DERIVED reads off another's run, too")
    ap.add_argument("--reread", action="append", metavar="NAME=DIR", default=[],
                    help="read a configuration's earlier run (the directory the bench printed) instead of rehearsing it")
    ap.add_argument("--json", action="store_true",
                    help='print only {"configs": [{"name", "idle_fraction", "ratio"}, ...]} (a five-round run\'s '
                         "modelled idle fraction, and its ratio to today's order); the rest goes to stderr")
    args = ap.parse_args()
    if not 1 <= args.played <= args.steps:
        ap.error(f"--played {args.played} must be between 1 and --steps {args.steps}")
    if not 0 < args.scale <= 1:
        ap.error(f"--scale {args.scale} must be in (0, 1]: rehearsal seconds per real second")
    out = sys.stderr if args.json else sys.stdout
    per = args.steps / args.played
    print(f"delays (real s -> rehearsal s at scale {args.scale:g}; {args.played} played steps a round, "
          f"each for {per:g} real):", file=out)
    waits = delay_env(args.scale, per)
    for name, d in DELAYS.items():
        print(f"  {name:<16}{d.real_s:>7g} -> {float(waits[d.knob]):6.2f}  {d.knob}"
              + (f" (x{per:g})" if name in STRETCHED and per != 1 else ""), file=out)
    names = [n for n in CONFIGS if not args.only or n in args.only]
    derived = {} if args.rehearse_all else {n: DERIVED[n] for n in names if n in DERIVED}
    rehearsed = [n for n in names if n not in derived]
    rehearsed += [src for src, _ in derived.values() if src not in rehearsed]
    began = time.monotonic()
    given = dict(r.rsplit("=", 1) for r in args.reread if "=" in r)  # a name may hold "=" (SAVE_HF=1)
    bad = [n for n in given if n not in CONFIGS] + [r for r in args.reread if "=" not in r]
    if bad:
        ap.error(f"--reread {bad[0]}: give NAME=DIR with NAME one of {', '.join(CONFIGS)}")
    with contextlib.redirect_stdout(out):  # rehearsal_run's progress lines too: --json's stdout is the JSON
        dirs = {n: Path(d) for n, d in given.items()}
        dirs |= run_all([n for n in CONFIGS if n in rehearsed and n not in given], args.scale, args.steps,
                        args.played, not args.one_at_a_time)
    results: dict[str, list[gpu_time.RoundTime]] = {}
    for name in names:
        src, check = derived.get(name, (name, None))
        rounds, recorded, healed = modelled_rounds(dirs[src])
        why = check(dirs[src], rounds, recorded) if check else None
        if why:
            sys.exit(f"'{name}' cannot be read off the run of '{src}' ({why}): run with --rehearse-all")
        results[name] = rounds
        evs = events.read(dirs[src] / "runs" / "rehearsal")
        converted = sum(1 for e in evs if e["kind"] == "convert-start")
        print(f"  {name}: " + (f"read off the run of '{src}' (cut 5 changes nothing there); " if src != name else "")
              + f"{len(recorded)} waits recorded; {healed} failed attempt(s) healed from and dropped; exports: {converted} by the converter, "
              f"{len(rounds) - converted} from --save-hf", file=out, flush=True)
    print(f"bench: {time.monotonic() - began:.0f} s for {len(dirs)} rehearsal(s)", file=out)
    rows, base = [], None
    for name, rounds in results.items():
        show(name, rounds, out)
        run5 = gpu_time.run_idle_frac(five_rounds(rounds))
        base = run5 if base is None else base
        rows.append({"name": name, "idle_fraction": round(run5, 4), "ratio": round(run5 / base, 3) if base else None})
        print(f"  a five-round run: idle {100 * run5:.1f}% = {run5 / base:.2f} x today's" if base else "", file=out)
    if args.json:
        print(json.dumps({"configs": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
