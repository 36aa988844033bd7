"""What the two-node tests share (tests/test_two_nodes.py, tests/test_two_node_joins.py): what they
need of the machine, the namespaces' addresses, the proxy a user's shell may hold, readers of the
stand-in slime's records, and what is left of a pair of namespaces."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, wandb_records

from pyhelpers.launch.node_storage import NONCE_NAME
from pyhelpers.procs import netns, procfs
from support.rehearsal import Run, outcome

HEAD, WORKER = "198.51.100.1", "198.51.100.2"
REHEARSE = str(ROOT / "bin" / "rehearse")


def need_root() -> None:
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.fail("the two-node tests need root (CAP_NET_ADMIN) and iproute2's `ip` (make setup installs it); "
                    "CI runs as root")
# A proxy in the user's shell: the job must never see it (the SGLang router would use it).
# (no_proxy covers loopback, as a user's would: the analyst's model stand-in listens there and the
# analyst, which talks to DashScope, honours the proxy -- it is not part of the job.)
PROXIES = {"http_proxy": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "no_proxy": "localhost,127.0.0.1"}


def two_node_outcome(run: Run) -> dict:
    """outcome() without the head's shared-storage nonce (node_storage.NONCE_NAME), which only a multi-node
    run leaves under TRAIN_SAVE."""
    out = outcome(run)
    out["weights"] = {k: v for k, v in out["weights"].items() if k != NONCE_NAME}
    return out


def slime_log(run: Run) -> str:
    return (run.run_dir / "logs" / "slime-log.log").read_text(errors="replace")


def ranks_of(log: str) -> dict[str, str]:
    """rank -> its line, from the stand-in's records (one job's worth: the last of each rank)."""
    out = {}
    for line in log.splitlines():
        if line.startswith("fake slime: rank "):
            out[line.split()[3]] = line
    return out


def wandb_actor_num_nodes(run: Run) -> list[str]:
    """actor_num_nodes as W&B's offline runs of the rehearsal recorded it (read with W&B's own reader)."""
    found = []
    for offline in sorted((run.run_dir / "wandb" / "wandb").glob("offline-run-*")):
        text = "\n".join(json.dumps(rec) for rec in wandb_records(offline))
        found += re.findall(r'actor_num_nodes\\?"[^0-9]{0,40}?(\d+)', text)
    return sorted(set(found))


def ray_process(netns_name: str, program: bytes, addr: str | None = None) -> int | None:
    """The pid of Ray's `program` inside network namespace `netns_name`: a binary by its path's end
    (b"/raylet", b"/gcs_server"), or a Python program by its script's (b"/dashboard/dashboard.py");
    serving node `addr` where given (only ours: another rehearsal on this host may have a worker at
    the same address in its own namespace)."""
    ns = os.stat(f"/run/netns/{netns_name}").st_ino
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
            if os.stat(p / "ns" / "net").st_ino != ns:
                continue
        except OSError:
            continue
        python = argv[0].endswith((b"/python", b"/python3"))  # its script: the first argument ending .py
        ran = next((a for a in argv[1:] if a.endswith(b".py")), b"") if python else argv[0]
        if ran.endswith(program) and (addr is None or f"--node_ip_address={addr}".encode() in argv):
            return int(p.name)
    return None


def inside(pair: netns.Pair) -> dict[int, int]:
    """{pid: start ticks} of every process inside the pair's two namespaces now."""
    return {p: procfs.start_ticks(p) for node in (pair.head, pair.worker) for p in node.pids()}


def left_of(pair: netns.Pair, pids: dict[int, int]) -> list[str]:
    """What is left of a two-node rehearsal's pair, as `ip netns list`, the mount table and `ip link`
    show it from this host, and which of the processes once inside it (`inside`) still run."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    out = [f"namespace {n.ns}" for n in (pair.head, pair.worker) if n.ns in listed]
    mounts = {line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()}
    out += [f"nsfs mount /run/netns/{n.ns}" for n in (pair.head, pair.worker) if f"/run/netns/{n.ns}" in mounts]
    out += [f"veth {n.iface}" for n in (pair.head, pair.worker) if f" {n.iface}@" in links or f" {n.iface}:" in links]
    out += [f"process {p} ({procfs.cmdline(p)})" for p, ticks in pids.items() if procfs.is_alive(p, ticks)]
    return out
