"""Benchmark: `make test` (or `make test-fast`) while a user's `make rehearse` loop runs beside it.

A researcher runs the suite on the machine where they also rehearse. Both must pass: the tests'
ports are claimed machine-wide and never a rehearsal's defaults (tests/support/port_claims.py),
and no test limit is one that load can break. This runs the rehearsal in a loop, as a user would
(`make rehearse`, its default ports, in a scratch RUNS_DIR and .env of its own so nothing of yours
is touched), and `make test` N times beside it, then stops the loop by its process group:

    .venv/bin/python bench/test_beside_rehearsals.py [--runs 2] [--target test|test-fast]

Prints each `make test`'s wall time and closing line, and how many rehearsals ran and passed
beside it; exits 1 when any `make test` or any finished rehearsal failed.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The loop: `make rehearse` again and again until the bench stops it (its own session, so the
# bench stops the whole group: make, bin/rehearse, the driver and its services).
LOOP = 'n=0; while :; do n=$((n+1)); make rehearse >"$LOGS/rehearse-$n.log" 2>&1; echo "$n $?" >>"$LOGS/results"; done'


def _closing_line(text: str) -> str:
    lines = [x for x in text.splitlines() if re.search(r"\d+ (passed|failed)", x)]
    return lines[-1].strip("= ") if lines else "(no pytest summary)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=2, help="how many `make test` in a row (default 2)")
    ap.add_argument("--target", choices=("test", "test-fast"), default="test")
    args = ap.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="shopsimrl-bench-beside-"))
    logs = scratch / "logs"
    logs.mkdir()
    env_file = scratch / ".env"
    env_file.write_text("")
    env_file.chmod(0o600)
    loop_env = {**os.environ, "SHOPSIMRL_ENV_FILE": str(env_file), "RUNS_DIR": str(scratch / "runs"),
                "LOGS": str(logs)}
    print(f"rehearsal loop: make rehearse in {scratch} (its default ports), logs in {logs}", flush=True)
    loop = subprocess.Popen(["bash", "-c", LOOP], cwd=ROOT, env=loop_env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    failed = False
    try:
        # The first rehearsal builds the stand-in world; start the suite once it is training.
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not list((scratch / "runs").glob("rehearsal/rounds/*/plugin.started")):
            time.sleep(1)
        for k in range(1, args.runs + 1):
            t0 = time.monotonic()
            res = subprocess.run(["make", args.target], cwd=ROOT, capture_output=True, text=True)
            wall = time.monotonic() - t0
            out = res.stdout + res.stderr
            (scratch / f"make-{args.target}-{k}.log").write_text(out)
            print(f"make {args.target} #{k}: rc {res.returncode}, {wall / 60:.1f} min, {_closing_line(out)}", flush=True)
            failed |= res.returncode != 0
    finally:
        os.killpg(loop.pid, signal.SIGTERM)
        loop.wait()
        # What the killed loop's last rehearsal left (driver, Ray, services): stopped by its groups.
        subprocess.run([str(ROOT / "bin" / "rehearse"), "--env", str(ROOT / ".venv" / "bin" / "python"), "-m",
                        "pyhelpers", "run", "stop"], cwd=ROOT, env=loop_env, capture_output=True)
        subprocess.run([str(ROOT / "bin" / "rehearse"), "--env", str(ROOT / ".venv" / "bin" / "python"), "-m",
                        "pyhelpers", "run", "cleanup"], cwd=ROOT, env=loop_env, capture_output=True)
    results = [line.split() for line in (logs / "results").read_text().splitlines()] if (logs / "results").exists() else []
    bad = [n for n, rc in results if rc != "0"]
    print(f"rehearsals beside it: {len(results)} finished, {len(results) - len(bad)} passed"
          + (f"; failed: {', '.join(f'{logs}/rehearse-{n}.log' for n in bad)}" if bad else ""))
    return 1 if failed or bad else 0


if __name__ == "__main__":
    sys.exit(main())
