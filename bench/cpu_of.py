#!/usr/bin/env python3
"""CPU-seconds a command costs, with every process it starts (daemons and orphans included).

    .venv/bin/python bench/cpu_of.py [--runs 2] -- .venv/bin/python -m pytest -x -q -p no:cacheprovider \\
        tests/test_rehearsal.py -k test_a_rehearsal_leaves_every_artifact_of_a_run

A rehearsal's processes leave their parents (Ray's daemons, the services in their own process
groups), so the shell's `time` misses most of them. Three figures per run:

  cgroup_cpu   exact: the command runs in a fresh cgroup-v1 cpuacct group (when /sys/fs/cgroup/cpuacct
               is writable, i.e. as root in this container), which every descendant joins at fork;
               its cpuacct.usage is all their CPU time, nothing else's. nan where not available.
  reaped_cpu   this process is a child subreaper (prctl PR_SET_CHILD_SUBREAPER): orphans are
               re-parented to it and reaped, so RUSAGE_CHILDREN holds their time -- except for
               children a process never waited for (SIGCHLD ignored: Ray's), so a lower bound.
  machine_cpu  the machine's busy time from /proc/stat over the same span: everything else running
               on the machine included, so it matches only on an idle machine.

--top N samples /proc every 0.25 s and prints the N command lines that used the most CPU.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import subprocess
import sys
import threading
import time
from collections import defaultdict

PR_SET_CHILD_SUBREAPER = 36
CPUACCT = "/sys/fs/cgroup/cpuacct"  # cgroup v1's CPU accounting, where it is mounted and writable


def _cgroup() -> str | None:
    """A fresh cpuacct cgroup for the command (exact: every descendant joins it at fork), or None."""
    path = f"{CPUACCT}/cpu_of-{os.getpid()}"
    try:
        os.mkdir(path)
    except OSError:
        return None
    return path


def cgroup_cpu_s(path: str | None) -> float:
    """The CPU seconds a cpuacct group's processes used (NaN when there is no group to read;
    bench/suite_cpu.py reads its per-test groups with this too)."""
    try:
        with open(f"{path}/cpuacct.usage") as fh:
            return int(fh.read()) / 1e9
    except (OSError, TypeError):
        return float("nan")


def _machine_cpu_s() -> float:
    with open("/proc/stat") as fh:
        fields = fh.readline().split()[1:]
    busy = sum(int(x) for i, x in enumerate(fields[:8]) if i not in (3, 4))  # all but idle and iowait
    return busy / os.sysconf("SC_CLK_TCK")


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _reap_all(deadline: float) -> int:
    """Reap every child (the command's orphans included) until none is left or the deadline."""
    left = 0
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return 0
        if pid == 0:
            if time.monotonic() > deadline:
                left = len([p for p in os.listdir("/proc") if p.isdigit() and _ppid(int(p)) == os.getpid()])
                return left
            time.sleep(0.1)


def _ppid(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def _sample(stop: threading.Event, seen: dict[int, tuple[str, float]], period: float) -> None:
    """Every `period` s: each descendant's command line and CPU time so far (the last sample
    counts; a process shorter than a period may be missed, and its time shows only in the total)."""
    tck, me = os.sysconf("SC_CLK_TCK"), os.getpid()
    while not stop.wait(period):
        parents = {}
        for p in os.listdir("/proc"):
            if p.isdigit():
                parents[int(p)] = _ppid(int(p))
        for pid in parents:
            q, hops = pid, 0
            while q > 1 and q != me and hops < 64:
                q, hops = parents.get(q, -1), hops + 1
            if q != me:
                continue
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    f = fh.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    cmd = fh.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            except OSError:
                continue
            if cmd:
                seen[pid] = (cmd, (int(f[11]) + int(f[12])) / tck)


def _label(cmd: str) -> str:
    words = [w for w in cmd.split() if not w.startswith("-")][:4]
    return " ".join(os.path.basename(w) if "/" in w else w for w in words)[:90]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--linger", type=float, default=30.0, help="seconds to wait for orphans after the command")
    ap.add_argument("--top", type=int, default=0, help="also print the N costliest command lines (sampled)")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        ap.error("no command")
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("prctl(PR_SET_CHILD_SUBREAPER) failed")
    rcs = 0
    for i in range(args.runs):
        c0, m0, w0 = _children_cpu_s(), _machine_cpu_s(), time.monotonic()
        seen: dict[int, tuple[str, float]] = {}
        stop = threading.Event()
        sampler = threading.Thread(target=_sample, args=(stop, seen, 0.25), daemon=True)
        if args.top:
            sampler.start()
        cg = _cgroup()

        def join(cg=cg):
            if cg:
                with open(f"{cg}/cgroup.procs", "w") as fh:
                    fh.write(str(os.getpid()))

        proc = subprocess.Popen(cmd, preexec_fn=join)
        rc = None
        while rc is None:  # reap orphans as they die too, so none lingers as a zombie
            pid, status = os.waitpid(-1, 0)
            if pid == proc.pid:
                rc = os.waitstatus_to_exitcode(status)
                proc.returncode = rc  # reaped here: Popen must not wait for it
        wall = time.monotonic() - w0
        left = _reap_all(time.monotonic() + args.linger)
        tree, machine, exact = _children_cpu_s() - c0, _machine_cpu_s() - m0, cgroup_cpu_s(cg)
        if cg:
            try:
                os.rmdir(cg)
            except OSError:
                pass
        print(f"run {i + 1}: rc={rc} wall={wall:.1f}s cgroup_cpu={exact:.1f}s reaped_cpu={tree:.1f}s "
              f"machine_cpu={machine:.1f}s" + (f" ({left} processes still alive, not counted)" if left else ""),
              flush=True)
        stop.set()
        if args.top:
            by: dict[str, list[float]] = defaultdict(list)
            for label, cpu in ((_label(c), t) for c, t in seen.values()):
                by[label].append(cpu)
            print(f"  sampled total {sum(t for _, t in seen.values()):.1f}s (this sampler included)")
            for label, cpus in sorted(by.items(), key=lambda kv: -sum(kv[1]))[:args.top]:
                print(f"  {sum(cpus):6.1f}s  x{len(cpus):<3} {label}")
        rcs |= rc != 0
    return int(bool(rcs))


if __name__ == "__main__":
    sys.exit(main())
