"""TCP ports: is one free, who holds it, and the error that names the holder (architecture §5).

`who_holds_port` reads /proc/net/tcp{,6} for listening sockets and maps their inodes to pids by
scanning /proc/*/fd; a socket owned by another user shows up with pid None (its fds are not
readable to us), which the message says.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from dataclasses import dataclass

from pyhelpers.errors import ToolkitError
from pyhelpers.procs import procfs


@dataclass(frozen=True)
class PortHolder:
    pid: int | None  # None: the socket belongs to a process we may not inspect
    cmdline: str
    address: str  # the local address it listens on, e.g. 127.0.0.1 or 0.0.0.0


def parse_hostport(text: str, where: str = "HOST:PORT") -> tuple[str, int]:
    """'127.0.0.1:5700' -> ('127.0.0.1', 5700); '[::1]:80' works too."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ToolkitError(f"not a HOST:PORT address: {text!r}", where, "write it like 127.0.0.1:5700")
    return host, int(port)


def port_free(host: str, port: int) -> bool:
    """True when a server could bind (host, port) now. SO_REUSEADDR is set, as servers do, so a
    socket lingering in TIME_WAIT does not count as taken; a listener does."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def who_holds_port(port: int) -> list[PortHolder]:
    """The processes listening on `port`, on any address."""
    sockets = procfs.listening_sockets(port)
    owners = procfs.pids_with_sockets(set(sockets))
    holders = []
    for inode, address in sorted(sockets.items()):
        pids = owners.get(inode)
        if not pids:
            holders.append(PortHolder(None, "", address))
        for pid in pids or ():
            holders.append(PortHolder(pid, procfs.cmdline(pid), address))
    return holders


def describe_holders(port: int, holders: list[PortHolder]) -> str:
    if not holders:
        return f"port {port} is taken (no listener found in /proc/net/tcp; maybe another network namespace)"
    parts = []
    for h in holders:
        if h.pid is None:
            parts.append(f"a process of another user (listening on {h.address})")
        else:
            parts.append(f"pid {h.pid} ({h.cmdline}) on {h.address}")
    return f"port {port} is held by " + ", ".join(dict.fromkeys(parts))


def check_port(host: str, port: int, ours: Iterable[int] = (), knob: str = "", stop_with: str = "make stop") -> None:
    """Raise ToolkitError unless (host, port) can be bound. The message names the holder and
    says whether it is one of `ours` (pids of groups we started), which `stop_with` stops."""
    if port_free(host, port):
        return
    holders = who_holds_port(port)
    ours = set(ours)
    mine = [h for h in holders if h.pid is not None and h.pid in ours]
    text = describe_holders(port, holders)
    if mine:
        raise ToolkitError(f"{text}, one of this run's own services", f"{host}:{port}",
                           f"it is still running from before: stop it with `{stop_with}`")
    change = f"set {knob} to a free port, or " if knob else ""
    raise ToolkitError(f"{text}, not ours", f"{host}:{port}" + (f" ({knob})" if knob else ""),
                       f"{change}stop that process yourself; it was not started by this run")
