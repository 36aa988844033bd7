"""This machine's network interfaces and their addresses, as the kernel reports them (getifaddrs(3)
through libc, the call `ip addr` and `ifconfig` make), in the network namespace of the caller.

Used by the multi-node checks (config/check.py: NODE_ADDR must be an address of this machine, NET_IFACE
must carry it) and by the two-node rehearsal (no host interface may already hold an address of its
range). No third-party package: the toolkit's venv has no psutil, and the slime env is not ours.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import ipaddress
import socket

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class _Sockaddr(ctypes.Structure):
    _fields_ = [("family", ctypes.c_ushort), ("data", ctypes.c_ubyte * 26)]


class _Ifaddrs(ctypes.Structure):
    pass


_Ifaddrs._fields_ = [("next", ctypes.POINTER(_Ifaddrs)), ("name", ctypes.c_char_p), ("flags", ctypes.c_uint),
                     ("addr", ctypes.POINTER(_Sockaddr)), ("netmask", ctypes.POINTER(_Sockaddr)),
                     ("ifu", ctypes.c_void_p), ("data", ctypes.c_void_p)]


def _address(sa: _Sockaddr) -> IPAddress | None:
    raw = bytes(sa.data)
    if sa.family == socket.AF_INET:  # sockaddr_in: port (2), then the address (4)
        return ipaddress.IPv4Address(raw[2:6])
    if sa.family == socket.AF_INET6:  # sockaddr_in6: port (2), flowinfo (4), then the address (16)
        return ipaddress.IPv6Address(raw[6:22])
    return None


def addresses() -> dict[str, list[IPAddress]]:
    """Interface name -> its IPv4/IPv6 addresses; every interface that exists is a key, an
    interface without an address maps to []."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    head = ctypes.POINTER(_Ifaddrs)()
    if libc.getifaddrs(ctypes.byref(head)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"getifaddrs: {ctypes.cast(libc.strerror(err), ctypes.c_char_p).value!r}")
    out: dict[str, list[IPAddress]] = {}
    try:
        node = head
        while node:
            entry = node.contents
            name = entry.name.decode(errors="replace")
            addrs = out.setdefault(name, [])
            if entry.addr:
                found = _address(entry.addr.contents)
                if found is not None and found not in addrs:
                    addrs.append(found)
            node = entry.next
    finally:
        libc.freeifaddrs(head)
    for _, name in socket.if_nameindex():  # (an interface that is down may have no entry above)
        out.setdefault(name, [])
    return out


def interface_of(addr: str) -> str | None:
    """The interface that carries addr, None when no interface of this machine does."""
    want = ipaddress.ip_address(addr)
    return next((name for name, addrs in addresses().items() if want in addrs), None)


def holding(network: str) -> list[tuple[str, IPAddress]]:
    """(interface, address) for each address of this machine inside network (CIDR)."""
    net = ipaddress.ip_network(network)
    return [(name, a) for name, addrs in addresses().items() for a in addrs if a.version == net.version and a in net]
