"""What a test reads from the two-node rehearsal's network namespaces (made by pyhelpers/procs/netns.py):
the listening TCP sockets of each, from /proc/net/tcp and tcp6 as seen inside it, and whether a
listener refuses a gRPC caller without the run's token."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
from dataclasses import dataclass

from pyhelpers.procs import netns

LISTEN = "0A"


@dataclass(frozen=True)
class Listener:
    ns: str
    addr: str  # '0.0.0.0' / '::' for every address
    port: int
    owner: str = ""  # the command line of the process holding it (for messages)

    @property
    def every_address(self) -> bool:
        return ipaddress.ip_address(self.addr).is_unspecified


def _addr(hex_addr: str) -> str:
    raw = bytes.fromhex(hex_addr)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))  # four host-order 32-bit words
    v6 = ipaddress.IPv6Address(words)
    return str(v6.ipv4_mapped or v6)


def listeners(ns: str, owners: dict[str, str] | None = None) -> set[Listener]:
    """Every listening TCP socket inside namespace ns (IPv4-mapped IPv6 addresses shown as IPv4).
    `owners` ({socket inode: command line}) keeps the owners found by earlier calls: a caller that
    polls (the two-node rehearsal's watcher, every second for minutes) then walks /proc only for
    sockets it has not seen, once for all of them (each socket's own walk of every process's fds
    took most of a core beside the rehearsal it watched)."""
    r = subprocess.run([netns._ip(), "netns", "exec", ns, "cat", "/proc/net/tcp", "/proc/net/tcp6"],
                       capture_output=True, text=True)
    if r.returncode:
        return set()
    found = []
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[3] == LISTEN and ":" in parts[1]:
            host, port = parts[1].rsplit(":", 1)
            found.append((_addr(host), int(port, 16), parts[9]))
    owners = {} if owners is None else owners
    owners.update(_owners({inode for _, _, inode in found} - set(owners)))
    return {Listener(ns, addr, port, owners.get(inode, "?")) for addr, port, inode in found}


def _owners(inodes: set[str]) -> dict[str, str]:
    """{socket inode: the command line of a process holding it}, from one walk of /proc (one pid
    namespace: /proc sees them all). A socket whose holder is not found (it exited) is left out."""
    want = {f"socket:[{inode}]": inode for inode in inodes}
    out: dict[str, str] = {}
    for proc in os.listdir("/proc") if want else ():
        if not proc.isdigit():
            continue
        try:
            for fd in os.listdir(f"/proc/{proc}/fd"):
                inode = want.get(os.readlink(f"/proc/{proc}/fd/{fd}"))
                if inode and inode not in out:
                    with open(f"/proc/{proc}/cmdline", "rb") as fh:
                        out[inode] = fh.read().replace(b"\0", b" ").decode(errors="replace")[:160]
        except OSError:
            continue
        if len(out) == len(want):
            break
    return out


# One method of each Ray gRPC service that listens on every address (GCS, raylet, object manager,
# the dashboard agent, core workers): with token auth on, each answers UNAUTHENTICATED to a caller
# without the token; a server without that service answers UNIMPLEMENTED.
# CoreWorkerService first: a job's worker may end while it is being called. (Ray 2.60's object
# manager has no FreeObjects any more -- UNIMPLEMENTED, which gRPC answers before any token check --
# so Pull, which it has, is called too.) A call that misses its deadline is made again with a longer
# one: a raylet at a load of 15 answered GetNodeStats DEADLINE_EXCEEDED after 10 s, and the test read
# that as "not a token-checked server".
METHODS = ("/ray.rpc.CoreWorkerService/GetObjectStatus", "/ray.rpc.NodeInfoGcsService/GetAllNodeInfo",
           "/ray.rpc.NodeManagerService/GetNodeStats", "/ray.rpc.ObjectManagerService/FreeObjects",
           "/ray.rpc.ObjectManagerService/Pull", "/ray.rpc.ReporterService/GetTraceback",
           "/ray.rpc.LogService/ListLogs")
_PROBE = r"""
import sys, grpc
addr, port = sys.argv[1], sys.argv[2]
DEADLINES = (10, 60, 240)
ch = grpc.insecure_channel(f"{addr}:{port}")
for m in sys.argv[3:]:
    for deadline in DEADLINES:  # a loaded server may answer late: only its answer counts, not a missed deadline
        try:
            ch.unary_unary(m, request_serializer=None, response_deserializer=None)(b"", timeout=deadline)
            answer = "OK"
        except grpc.RpcError as e:
            answer = e.code().name
        if answer != "DEADLINE_EXCEEDED":
            break
    print(m, answer)
# gRPC server reflection (Ray enables it): list_services = field 7 of ServerReflectionRequest
try:
    call = ch.stream_stream("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                            request_serializer=None, response_deserializer=None)
    for reply in call(iter([b"\x3a\x00"]), timeout=10):
        import re
        print("services", ",".join(sorted(set(x.decode() for x in re.findall(rb"[A-Za-z_][A-Za-z0-9_.]+\.[A-Z][A-Za-z0-9]+", reply)))))
        break
except grpc.RpcError as e:
    print("services", "reflection:" + e.code().name)
"""


NAMESPACE_GONE = "NAMESPACE-GONE"  # grpc_answers: the caller's namespace was removed before the call


def grpc_answers(from_ns: str, addr: str, port: int) -> dict[str, str]:
    """{method: gRPC status} for each of METHODS called without a token from namespace from_ns."""
    r = subprocess.run([netns._ip(), "netns", "exec", from_ns, sys.executable, "-c", _PROBE, addr, str(port), *METHODS],
                       capture_output=True, text=True, timeout=3600, env={"PATH": "/usr/bin:/bin"})
    answers = dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
    if not answers:
        # No call was made. The pair the listener was seen in can be torn down between the read of
        # /proc/net/tcp and this call (a killed run's pair reclaimed by `make stop` or the resume):
        # `ip netns exec` then fails before the probe starts, and the listener is gone with its
        # namespace. Anything else is kept as the probe's own words, for the test to show.
        gone = not (netns.NETNS_DIR / from_ns).exists()
        answers = {"probe": NAMESPACE_GONE if gone else f"rc {r.returncode}: {r.stderr.strip()[-400:]}"}
    return answers
