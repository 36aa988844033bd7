"""The line `make test` / `make test-fast` print before pytest starts: which lane, how many
workers, and roughly how long, from the last run's test times on this machine (tests/conftest.py
keeps them in .pytest_cache) or, on a first run, from the figures measured on a 2-core machine.

    python tests/support/lane_estimate.py full|fast WORKERS
    python tests/support/lane_estimate.py save     # this machine's last full run -> tests/durations.json

tests/durations.json (checked in) is what a fresh clone starts from: the order the workers take
tests in (longest first) and this estimate. Save it again after a `make test` on a quiet 2-core
machine when tests were added or got slower.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".pytest_cache" / "v" / "shopsimrl"
CHECKED_IN = ROOT / "tests" / "durations.json"
# Measured with `make test` / `make test-fast` on a quiet 2-core machine (README "Tests").
FIRST_RUN = {"full": "about 10 min on 2 cores", "fast": "under a minute on 2 cores"}
WHAT = {"full": "every test, the rehearsals, Ray and fault tests included",
        "fast": "the unit and component tests (no rehearsal, Ray or service process)"}


def _load(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def estimate(lane: str, workers: int) -> str:
    durations, heavy = _load(CACHE / "durations"), set(_load(CACHE / "heavy") or [])
    if not durations or (lane == "full" and not heavy):  # never a whole run here yet
        return FIRST_RUN[lane]
    lane_times = [s for t, s in durations.items() if lane == "full" or t not in heavy]
    # The longest test bounds the wall time from below, whatever the workers.
    wall = max(sum(lane_times) / max(workers, 1), max(lane_times, default=0))
    return f"about {max(1, round(wall / 60))} min here (the last run's test times over {workers} workers)"


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
    print(f"lane {lane}: {WHAT[lane]}; {estimate(lane, workers)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
