"""The head's Ray lost (its GCS, raylet or dashboard killed, e.g. by the OOM killer): how the toolkit
tells, and the one error it raises for it, which the supervisor's RULES classify `ray-lost`
(transient: the run stops what is left, starts the head's Ray again and resumes from the last
checkpoint).

The ray-head service's process group says little here: `ray start --block` ends as soon as one of
the processes it started dies -- it kills the others and exits 1 (ray 2.60.0 scripts/scripts.py:
1284-1321) -- but what the raylet started (ray::DashboardAgent, ray::RuntimeEnvAgent) can outlive
it in the group for minutes, so a group with members is no live head. `why_lost()` asks the `ray
start` process itself and the GCS port; what died it reads from Ray's own report in the service's log.
"""

from __future__ import annotations

import re

from pyhelpers.config import ray_ports
from pyhelpers.errors import ToolkitError
from pyhelpers.launch import ray_start
from pyhelpers.procs import groups, procfs, ready
from pyhelpers.run.layout import RunLayout

SERVICE = "ray-head"
# What ray-lost's RULES row matches first: the toolkit's own words for a lost head.
LOST = "the head's Ray is lost"
# ray 2.60.0 scripts/scripts.py:1249-1251: printed once Node() returned, i.e. the raylet registered
STARTED = "Ray runtime started."
# ray 2.60.0 scripts/scripts.py:87 prints one line per process that died: "<name> [exit code=N]"
_DIED = re.compile(r"(\w+) \[exit code=(-?\d+)\]")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def error(what: str, where: str) -> ToolkitError:
    return ToolkitError(f"{LOST}: {what}", where, "`make resume` starts it anew and training resumes from the last "
                        "checkpoint; if it keeps dying, look for OOM kills on the head (`dmesg`)")


def why_lost(cfg, lay: RunLayout) -> str | None:
    """None while the head's Ray is whole: its `ray start --block` runs and its GCS port answers.
    Else what is wrong, in a few words (what died, when Ray said so)."""
    path = groups.pidfile(lay.pids, SERVICE)
    if not path.exists():
        return "the ray-head service is not running"
    rec = groups.load(path)
    st = procfs.read_stat(rec.pid)
    if not st or st.start_ticks != rec.start_ticks or st.state == "Z":
        return f"its `ray start --block` (pid {rec.pid}) ended{_what_died(rec.log)}"
    host, port = ray_start.head_node_addr(cfg), ray_ports.port_of(cfg, "GCS")
    ok, _ = ready.tcp_probe(host, port)()
    if not ok:
        return f"nothing answers on its GCS port {host}:{port}"
    return None


def _what_died(log: str) -> str:
    """': gcs_server exited (exit code -9)' from Ray's report of the processes that died."""
    died: list[tuple[str, str]] = []
    for line in groups.log_tail(log, 400):
        text = _ANSI.sub("", line)
        if "exited unexpectedly" in text:  # the latest report only (the log holds every start)
            died = []
        m = _DIED.search(text)
        if m and m.group(1) not in [d[0] for d in died]:
            died.append((m.group(1), m.group(2)))
    if not died:
        return f" (see {log})"
    return ": " + ", ".join(f"{name} exited (exit code {code}{', SIGKILL: the OOM killer?' if code == '-9' else ''})"
                            for name, code in died)


def raylets_naming(gcs: str) -> list[int]:
    """Live raylets on this host started with `--gcs-address=<gcs>`. `ray start --head` refuses to start
    while any is ("Ray is trying to start at …, but is already running at …": ray/_private/services.py
    283-330, 2.60.0, reads every local raylet's command line). After the head's GCS died, a worker's
    raylet on the same host (the two-node rehearsal's namespaces) names it until it gives up on that
    GCS, about a minute later; on a real cluster only a leftover of the head's own session would."""
    flag = f"--gcs-address={gcs}"
    out = []
    for pid in procfs.all_pids():
        try:
            argv = (procfs.PROC / str(pid) / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"/raylet") and flag.encode() in argv and procfs.is_alive(pid):
            out.append(pid)
    return out
