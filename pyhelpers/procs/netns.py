"""Two network namespaces joined by a veth pair: two "machines" on one host, for the two-node
rehearsal (make rehearse NNODES=2, docs/multinode.md §8) and its tests.

    with netns.Pair.create() as pair:      # needs root (CAP_NET_ADMIN) and iproute2's `ip`
        pair.head.exec_argv(["ray", "start", ...])   # ["ip", "netns", "exec", <name>, ...]
        pair.head.addr, pair.worker.addr             # 198.51.100.1, 198.51.100.2

The addresses come from 198.51.100.0/24 (TEST-NET-2, RFC 5737: documentation only, never routed),
and exist only inside the two namespaces: the host's own interfaces never get one, so two pairs
(two checkouts rehearsing at once) never collide; their names carry a tag unique to the caller.
A host interface that already holds an address of the range is refused (a machine that uses it
would route the rehearsal's traffic into its own network). Teardown always runs: it stops every
process still inside a namespace (by pid, as `ip netns pids` names them; each was started in it by
the rehearsal) and deletes both namespaces, which deletes the veth pair with them.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass

from pyhelpers.errors import ToolkitError
from pyhelpers.procs import netif

NETWORK = "198.51.100.0/24"
HEAD_ADDR, WORKER_ADDR = "198.51.100.1", "198.51.100.2"
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


@dataclass(frozen=True)
class Node:
    ns: str
    iface: str
    addr: str

    def exec_argv(self, argv: list[str]) -> list[str]:
        """argv run inside this node's namespace (same files, same users: only the network differs)."""
        return [_ip(), "netns", "exec", self.ns, *argv]

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

    def remove(self, grace: float = 5.0) -> None:
        """Stop what still runs inside (TERM, then KILL after grace) and delete both namespaces."""
        ip = _ip()
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
            pids = [p for n in (self.head, self.worker) for p in n.pids()]
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            end = time.monotonic() + wait
            while pids and time.monotonic() < end and any(n.pids() for n in (self.head, self.worker)):
                time.sleep(0.1)
        for node in (self.head, self.worker):
            subprocess.run([ip, "netns", "del", node.ns], capture_output=True)
        subprocess.run([ip, "link", "del", self.head.iface], capture_output=True)  # (if a failed create left it here)
