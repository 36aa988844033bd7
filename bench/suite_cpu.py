#!/usr/bin/env python3
"""CPU-seconds of each test of a lane, with every process it started (Ray's daemons and the
services in their own groups included): where `make test`'s time goes on a CPU-bound machine.

    .venv/bin/python bench/suite_cpu.py [--fast] [--top 40] [-- PYTEST_ARGS...]

The lane runs as `bin/test` runs it (its xdist workers, its order), with this file as a pytest
plugin: each test runs in a cgroup-v1 cpuacct group of its own, which the worker joins for the
test and every process it starts inherits at fork, however it leaves its parent. A group's usage
is read after the whole lane ended, so a process that outlived its test (a module's shared
rehearsal, a daemon) still counts to the test that started it; a shared fixture counts to the
first test that asked for it. Needs a writable /sys/fs/cgroup/cpuacct (root in this container).

On a CPU-bound machine the lane's wall time is about its total CPU over the cores: a test's CPU,
not its wall time (much of which is waiting), is what a change must cut. Prints the total, the
heavy and fast tests' shares and the N costliest tests.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from cpu_of import CPUACCT, cgroup_cpu_s  # bench/ is on the path: the script's own dir, or PYTHONPATH below

GROUP_ENV, INDEX_ENV = "SUITE_CPU_GROUP", "SUITE_CPU_INDEX"
ROOT = Path(__file__).resolve().parents[1]


def _join(group: str) -> None:
    with open(os.path.join(group, "cgroup.procs"), "w") as fh:
        fh.write(str(os.getpid()))


# --- the plugin (loaded by each xdist worker: -p suite_cpu) ---------------------------------------

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # noqa: ARG001 - pytest's hook signature
    """Where the test runs (an xdist worker, never the controller): the test, its set-up and
    teardown inside its own group; the worker leaves it after, what the test started stays."""
    base = os.environ.get(GROUP_ENV)
    if not base:
        yield
        return
    name = hashlib.sha1(item.nodeid.encode()).hexdigest()[:16]
    os.makedirs(os.path.join(base, name), exist_ok=True)
    _join(os.path.join(base, name))
    try:
        yield
    finally:
        _join(CPUACCT)
        with open(os.environ[INDEX_ENV], "a") as fh:
            fh.write(json.dumps({"id": item.nodeid, "group": name}) + "\n")


# --- the command ---------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fast", action="store_true", help="the fast lane (bin/test --fast)")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("pytest_args", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    extra = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
    base = f"{CPUACCT}/suite_cpu-{os.getpid()}"
    try:
        os.mkdir(base)
    except OSError as exc:
        sys.exit(f"cannot make a cpuacct group under {CPUACCT} ({exc.strerror}): this bench needs cgroup v1's "
                 "CPU accounting mounted and writable (root)")
    heavy = {ln.strip() for ln in subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "heavy"], cwd=ROOT, capture_output=True,
        text=True).stdout.splitlines() if "::" in ln}
    with tempfile.NamedTemporaryFile("r", prefix="suite_cpu-", suffix=".jsonl") as index:
        env = {**os.environ, GROUP_ENV: base, INDEX_ENV: index.name,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "bench"), os.environ.get("PYTHONPATH")]))}
        t0 = time.monotonic()
        rc = subprocess.run([str(ROOT / "bin" / "test"), *(["--fast"] if args.fast else []), "-p", "suite_cpu", *extra],
                            cwd=ROOT, env=env).returncode
        wall = time.monotonic() - t0
        rows = [json.loads(ln) for ln in index if ln.strip()]
    tests = sorted(((cgroup_cpu_s(f"{base}/{r['group']}"), r["id"]) for r in rows), reverse=True)
    total = sum(cpu for cpu, _ in tests)
    heavy_cpu = sum(cpu for cpu, tid in tests if tid.split("@")[0] in heavy)
    print(f"\n{len(tests)} tests, exit {rc}: {total:.0f} CPU-s in {wall:.0f} s on {os.cpu_count()} CPUs "
          f"(CPU/cores {total / (os.cpu_count() or 1):.0f} s); heavy tests {heavy_cpu:.0f} CPU-s, "
          f"the rest {total - heavy_cpu:.0f}")
    print(f"{'CPU-s':>8} {'share':>6}  test")
    for cpu, tid in tests[:args.top]:
        print(f"{cpu:8.1f} {100 * cpu / total:5.1f}%  {tid.split('@')[0]}")
    for group in [f"{base}/{r['group']}" for r in rows] + [base]:
        try:
            os.rmdir(group)  # kept where a process of it still runs
        except OSError:
            pass
    return rc


if __name__ == "__main__":
    sys.exit(main())
