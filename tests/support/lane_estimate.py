"""The line `make test` / `make test-fast` print before pytest starts: the lane, its workers, and
an estimate that says what it rests on, beside the load now.

    python tests/support/lane_estimate.py full|fast WORKERS
    python tests/support/lane_estimate.py save     # this machine's last full run -> tests/durations.json

The estimate is this checkout's last complete run of the lane: pytest's wall time, its workers and
the load average as it began (the 1-minute figure, before its workers started: the same measure
as the load now). tests/conftest.py records it at the end of every run bin/test starts for a whole
lane (LANE_ENV), in .pytest_cache (never in git). A busier machine than then takes longer: the
line says so. With no run recorded here (a fresh clone, CI), it gives the figure measured on a
quiet 2-core machine (QUIET: README "Tests" and bin/test's Summary line state the same) and says so.

tests/durations.json (checked in) is what a fresh clone orders its tests by (longest first). Save
it again after a `make test` on a quiet 2-core machine when tests were added or got slower.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".pytest_cache" / "v" / "shopsimrl"
CHECKED_IN = ROOT / "tests" / "durations.json"
LANES_KEY = "shopsimrl/lanes"  # in .pytest_cache: {lane: one run's record (lane_record)}
LANE_ENV = "SHOPSIMRL_TEST_LANE"  # bin/test sets it to the lane when it runs the whole lane
# Measured with `make test` / `make test-fast` on a quiet 2-core machine (README "Tests", bin/test's
# and bin/test-fast's Summary lines; docs/architecture.md §10 has the dates).
QUIET = {"full": "about 15 min", "fast": "under a minute"}
QUIET_MACHINE = "on a quiet 2-core machine"
WHAT = {"full": "every test, the rehearsals, Ray and fault tests included",
        "fast": "the unit and component tests (no rehearsal, Ray or service process)"}
# A load this much above (below) the last run's, a whole CPU's worth of other work: expect longer (shorter).
LOAD_STEP = 1.0


def _load(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def lane_record(wall_s: float, load: float, workers: int | None, cpus: int, passed: bool) -> dict:
    """What conftest keeps of one whole-lane run: the estimate's basis."""
    return {"wall_s": round(wall_s, 1), "load": round(load, 2), "workers": workers, "cpus": cpus,
            "passed": passed, "at": time.strftime("%Y-%m-%d %H:%M")}


def clock(seconds: float) -> str:
    """8:46, or 1:02:03 past an hour."""
    m, s = divmod(round(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _roughly(seconds: float) -> str:
    return f"{round(seconds)} s" if seconds < 90 else f"{round(seconds / 60)} min"


def estimate(lane: str, workers: int, last: dict | None, load_now: float, cpus: int) -> str:
    """The estimate of a lane's pytest run: the last run recorded here (`last`, a lane_record, or
    None) and what it rests on, then the load now."""
    now = f"load now {load_now:.1f} on {cpus} CPUs"
    if not last:  # a quiet machine's load: about 0
        return (f"est. {QUIET[lane]} {QUIET_MACHINE} (no {lane} run recorded here yet, so the committed "
                f"figure); {now}{': expect longer' if load_now >= LOAD_STEP else ''}")
    then = f"last {lane} run here {clock(last['wall_s'])} at load {last['load']:.1f}"
    differs = [f"{last['workers']} workers" if last.get("workers") != workers else "",
               f"{last['cpus']} CPUs" if last.get("cpus") != cpus else "",
               "with failures" if not last.get("passed", True) else ""]
    said = "; ".join(x for x in (", ".join(d for d in differs if d), last.get("at")) if x)
    then += f" ({said})" if said else ""
    if load_now >= last["load"] + LOAD_STEP:
        now += ": expect longer"
    elif load_now <= last["load"] - LOAD_STEP:
        now += ": expect shorter"
    return f"est. {_roughly(last['wall_s'])}: {then}; {now}"


def save() -> int:
    durations, heavy = _load(CACHE / "durations"), _load(CACHE / "heavy")
    if not durations or not heavy:
        print("no full `make test` run recorded here yet (.pytest_cache): run make test first", file=sys.stderr)
        return 1
    CHECKED_IN.write_text(json.dumps({t: round(s, 1) for t, s in sorted(durations.items())}, indent=0) + "\n")
    print(f"wrote {CHECKED_IN} ({len(durations)} tests)")
    return 0


def main() -> int:
    if sys.argv[1:] == ["save"]:
        return save()
    lane, workers = sys.argv[1], int(sys.argv[2])
    last = (_load(CACHE / "lanes") or {}).get(lane)
    if not (isinstance(last, dict) and isinstance(last.get("wall_s"), (int, float))
            and isinstance(last.get("load"), (int, float))):
        last = None  # none, or written by another version of this file: the committed figure
    text = estimate(lane, workers, last, os.getloadavg()[0], len(os.sched_getaffinity(0)))
    print(f"lane {lane}: {WHAT[lane]}; {workers} workers; {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
