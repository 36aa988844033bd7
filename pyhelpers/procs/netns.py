"""Two network namespaces joined by a veth pair: two "machines" on one host, for the two-node
rehearsal (make rehearse NNODES=2, docs/multinode.md §8) and its tests.

    with netns.Pair.create() as pair:      # needs root (CAP_NET_ADMIN) and iproute2's `ip`
        pair.head.exec_argv(["ray", "start", ...])   # ["ip", "netns", "exec", <name>, ...]
        pair.head.addr, pair.worker.addr             # 198.51.100.1, 198.51.100.2

The addresses come from 198.51.100.0/24 (TEST-NET-2, RFC 5737: documentation only, never routed),
and exist only inside the two namespaces: the host's own interfaces never get one, so two pairs
(two checkouts rehearsing at once) never collide; their names carry a tag unique to the caller.
A host interface that already holds an address of the range is refused (a machine that uses it
would route the rehearsal's traffic into its own network). `remove()` can be run by anyone who
holds the pair's names (`record()` / `from_record()`: a later command reclaims what a killed
rehearsal left): it stops every process still inside a namespace, then deletes both namespaces,
their /run/netns mounts, and with them the veth pair.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from pyhelpers.errors import ToolkitError
from pyhelpers.procs import family, netif

NETWORK = "198.51.100.0/24"
HEAD_ADDR, WORKER_ADDR = "198.51.100.1", "198.51.100.2"
NETNS_DIR = Path("/run/netns")  # where `ip netns add` mounts (nsfs) each named namespace
REMOVE_SCANS = 5  # remove(): a process started while the last ones were stopped is found by the next look
PREFIX = "ssr"  # names: ssr-<tag>-head / ssr-<tag>-worker (namespaces), ssr<tag>h / ssr<tag>w (veths)


def _ip() -> str:
    ip = shutil.which("ip") or next((p for p in ("/usr/sbin/ip", "/sbin/ip") if os.access(p, os.X_OK)), None)
    if not ip:
        raise ToolkitError("the two-node rehearsal needs iproute2's `ip`, which is not installed", "PATH",
                           "run `make setup` as root (it installs env/system-packages.txt), or apt-get install iproute2")
    return ip


def preflight() -> str:
    """`ip`'s path once root, `ip` and a free TEST-NET-2 are there; else the error naming what is missing."""
    if os.geteuid() != 0:
        raise ToolkitError("the two-node rehearsal needs root (CAP_NET_ADMIN) to create two network namespaces "
                           "and a veth pair", f"uid {os.geteuid()}",
                           "run it as root (sudo make rehearse NNODES=2), or rehearse one node: make rehearse")
    ip = _ip()
    held = netif.holding(NETWORK)
    if held:
        shown = ", ".join(f"{a} on {name}" for name, a in held)
        raise ToolkitError(f"this machine already holds an address of {NETWORK}, the range the two-node rehearsal "
                           f"gives its namespaces: {shown}", "ip addr",
                           "rehearse on a machine that does not use TEST-NET-2 (it is reserved for documentation, "
                           "RFC 5737), or remove that address")
    return ip


def _run(ip: str, *args: str) -> None:
    r = subprocess.run([ip, *args], capture_output=True, text=True)
    if r.returncode:
        raise ToolkitError(f"`ip {' '.join(args)}` failed: {r.stderr.strip()}", "ip", "see the message; the "
                           "namespaces made so far are removed")


def exec_argv(ns: str, argv: list[str]) -> list[str]:
    """argv run inside the named network namespace."""
    return [_ip(), "netns", "exec", ns, *argv]


@dataclass(frozen=True)
class Node:
    ns: str
    iface: str
    addr: str

    def exec_argv(self, argv: list[str]) -> list[str]:
        """argv run inside this node's namespace (same files, same users: only the network differs)."""
        return exec_argv(self.ns, argv)

    def pids(self) -> list[int]:
        r = subprocess.run([_ip(), "netns", "pids", self.ns], capture_output=True, text=True)
        return [int(p) for p in r.stdout.split()] if r.returncode == 0 else []


@dataclass(frozen=True)
class Pair:
    tag: str
    head: Node
    worker: Node

    @classmethod
    def create(cls, tag: str | None = None) -> Pair:
        ip = preflight()
        tag = tag or f"{os.getpid() % 100000:05d}{secrets.token_hex(2)}"  # veth names stop at 15 characters
        pair = cls(tag, Node(f"{PREFIX}-{tag}-head", f"{PREFIX}{tag}h", HEAD_ADDR),
                   Node(f"{PREFIX}-{tag}-worker", f"{PREFIX}{tag}w", WORKER_ADDR))
        try:
            for node in (pair.head, pair.worker):
                _run(ip, "netns", "add", node.ns)
            _run(ip, "link", "add", pair.head.iface, "type", "veth", "peer", "name", pair.worker.iface)
            for node in (pair.head, pair.worker):
                _run(ip, "link", "set", node.iface, "netns", node.ns)
                _run(ip, "-n", node.ns, "addr", "add", f"{node.addr}/24", "dev", node.iface)
                _run(ip, "-n", node.ns, "link", "set", node.iface, "up")
                _run(ip, "-n", node.ns, "link", "set", "lo", "up")
        except BaseException:
            pair.remove()
            raise
        return pair

    def __enter__(self) -> Pair:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def record(self) -> dict:
        """The pair's names and addresses as JSON, from which `from_record` rebuilds it."""
        return {"tag": self.tag, "head": asdict(self.head), "worker": asdict(self.worker)}

    @classmethod
    def from_record(cls, rec: dict) -> Pair:
        return cls(rec.get("tag", ""), Node(**rec["head"]), Node(**rec["worker"]))

    def exists(self) -> bool:
        """Any of the pair is left: a namespace's name, its nsfs mount, a veth end in this namespace."""
        return bool(self.mounted() or any((NETNS_DIR / n.ns).exists() or Path("/sys/class/net", n.iface).exists()
                                          for n in (self.head, self.worker)))

    def mounted(self) -> list[str]:
        """The mount points of the pair's namespaces still in this mount namespace's table."""
        want = {str(NETNS_DIR / n.ns) for n in (self.head, self.worker)}
        try:
            lines = Path("/proc/self/mountinfo").read_text().splitlines()
        except OSError:
            return []
        return [f[4] for f in (line.split() for line in lines) if len(f) > 4 and f[4] in want]

    def remove(self, grace: float = 5.0) -> list[str]:
        """Stop what still runs inside (TERM, then KILL after grace; looked for again until nothing is
        left, since a dying process may start another) and delete both namespaces, which deletes the
        veth pair with them. Each process by its pid, as `ip netns pids` names it: its process group
        may reach outside (the rehearsal's own group holds the user's `make`). Returns what it did."""
        ip = _ip()
        done = []
        for _ in range(REMOVE_SCANS):
            inside = {p: f"inside {n.ns}" for n in (self.head, self.worker) for p in n.pids()}
            if not inside:
                break
            done += [r.message for r in family.stop_pids(inside, grace)]
        for node in (self.head, self.worker):
            for _ in range(REMOVE_SCANS):  # (a name mounted twice needs a `del` per mount)
                if not ((NETNS_DIR / node.ns).exists() or str(NETNS_DIR / node.ns) in self.mounted()):
                    break
                r = subprocess.run([ip, "netns", "del", node.ns], capture_output=True, text=True)
                if r.returncode:
                    done.append(f"network namespace {node.ns}: `ip netns del` failed: {r.stderr.strip()}")
                    break
                done.append(f"network namespace {node.ns} deleted")
            # (a failed create, or a namespace deleted under it, leaves an end in this namespace)
            if Path("/sys/class/net", node.iface).exists():
                subprocess.run([ip, "link", "del", node.iface], capture_output=True)
                done.append(f"veth {node.iface} deleted")
        return done
