"""Benchmark: the toolkit's own time per round transition (architecture §10: target <= 2 s).

A round transition is everything between the slime job's end (round r) and the next job's
submission (round r+1): drain the analyst, run every stage of the round after train, prepare the
next round. Its own time is that window minus what is not the toolkit's: the HF conversion, the
eval server's start, and the val/gate episodes (the policy's time). Measured from the run's
events.jsonl (times only live there), in a rehearsal with zero-latency stand-ins:

    .venv/bin/python bench/round_overhead.py [--rounds 3]       # runs a fresh rehearsal (~1.5 min)
    .venv/bin/python bench/round_overhead.py --run-dir runs/rehearsal   # an existing run's events

Prints one line per transition with the window, what is subtracted, the toolkit's own time, and
where the window went (stage by stage).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import rehearsal_run  # noqa: E402

from pyhelpers.run import events  # noqa: E402

TARGET_S = 2.0


def _first(evs, kind, **f):
    return next((e for e in evs if e["kind"] == kind and all(e.get(k) == v for k, v in f.items())), None)


def _last(evs, kind, **f):
    return next((e for e in reversed(evs) if e["kind"] == kind and all(e.get(k) == v for k, v in f.items())), None)


def transitions(evs: list[dict]) -> list[dict]:
    out = []
    rounds = sorted({e["round"] for e in evs if e["kind"] == "job-submitted"})
    for r in rounds[:-1]:
        end, nxt = _last(evs, "job-end", round=r), _last(evs, "job-submitted", round=r + 1)
        if not end or not nxt:
            continue
        window = nxt["t"] - end["t"]
        inside = [e for e in evs if end["t"] <= e["t"] <= nxt["t"]]
        cs, ce = _first(inside, "convert-start", round=r), _first(inside, "convert-end", round=r)
        convert = ce["t"] - cs["t"] if cs and ce else 0.0
        ready = _first(inside, "service-ready", service="eval-server", round=r)
        server = ready["seconds"] if ready else 0.0
        episodes = sum(e["seconds"] for e in inside if e["kind"] == "episodes" and e.get("round") == r)
        stages = {}
        for e in inside:
            if e["kind"] == "stage-end" and "seconds" in e:
                stages[f"{e['stage']}[r{e['round']}]"] = e["seconds"]
        own = window - convert - server - episodes
        out.append({"from": r, "window": window, "convert": convert, "server": server, "episodes": episodes,
                    "own": own, "stages": stages})
    return out


def rehearse(rounds: int) -> Path:
    tmp = Path(tempfile.mkdtemp(prefix="round-overhead-"))
    return rehearsal_run.rehearse(f"zero-latency stand-ins, ROUNDS={rounds}", tmp, ROUNDS=str(rounds))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the rehearsal (transitions = rounds - 1)")
    ap.add_argument("--run-dir", type=Path, help="read this run's events.jsonl instead of rehearsing")
    args = ap.parse_args()
    run_dir = args.run_dir or rehearse(args.rounds)
    rows = transitions(events.read(run_dir))
    if not rows:
        sys.exit(f"no complete round transition in {run_dir}/events.jsonl")
    print(f"{'transition':<12}{'window':>8}{'convert':>9}{'server':>8}{'episodes':>10}{'toolkit':>9}  target <= "
          f"{TARGET_S:.0f} s")
    for row in rows:
        flag = "ok" if row["own"] <= TARGET_S else "ABOVE"
        print(f"r{row['from']} -> r{row['from'] + 1:<5}{row['window']:>8.2f}{row['convert']:>9.2f}{row['server']:>8.2f}"
              f"{row['episodes']:>10.2f}{row['own']:>9.2f}  {flag}")
        print("    stages: " + ", ".join(f"{k} {v:.2f}" for k, v in row["stages"].items()))
    worst = max(r["own"] for r in rows)
    print(f"worst transition: {worst:.2f} s of the toolkit's own time (target <= {TARGET_S:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
