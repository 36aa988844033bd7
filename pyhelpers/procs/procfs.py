"""Reading the Linux process table (/proc): who is alive, which group, since when, holding what.

Everything that decides whether a process is *ours* reads from here. A process is identified by
its pid AND its start time (field 22 of /proc/<pid>/stat, in clock ticks since boot), so a pid
reused by an unrelated program is never mistaken for the one we started. Zombies count as dead:
this machine's PID 1 does not reap orphans, so killed processes can linger in state Z forever.

Hand-written rather than psutil: psutil is not in the venv, and what we need (one stat line, a
group scan, an fd scan) is a few clear lines; psutil also has no process-group query and reports
start time as a float, where we compare exact ticks.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Stat:
    """The fields of /proc/<pid>/stat we use."""

    pid: int
    comm: str
    state: str  # R, S, D, Z, T, ...
    ppid: int
    pgid: int
    sid: int
    start_ticks: int  # field 22: start time after boot, in clock ticks


def read_stat(pid: int) -> Stat | None:
    """The process's stat line, or None when there is no such process (or it vanished)."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm is in parentheses and may itself contain spaces or ')': split at the LAST ')'.
    head, _, tail = raw.rpartition(")")
    f = tail.split()
    return Stat(pid=pid, comm=head.partition("(")[2], state=f[0], ppid=int(f[1]), pgid=int(f[2]),
                sid=int(f[3]), start_ticks=int(f[19]))


def boot_id() -> str:
    """This machine's boot id (the kernel's, new at every boot): a pid means something only with it."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def start_ticks(pid: int) -> int | None:
    st = read_stat(pid)
    return st.start_ticks if st else None


def is_alive(pid: int, ticks: int | None = None) -> bool:
    """True when pid exists, is not a zombie and (if ticks is given) started at that tick."""
    st = read_stat(pid)
    return bool(st) and st.state != "Z" and (ticks is None or st.start_ticks == ticks)


def cmdline(pid: int, limit: int = 200) -> str:
    """The process's command line, space-joined and cut to `limit` characters ('' if unknown)."""
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ""
    text = raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace").strip()
    if not text:
        st = read_stat(pid)
        text = f"[{st.comm}]" if st else ""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def all_pids() -> Iterator[int]:
    for entry in os.listdir(PROC):
        if entry.isdigit():
            yield int(entry)


def group_members(pgid: int) -> list[int]:
    """Pids of the live (non-zombie) members of process group pgid."""
    out = []
    for pid in all_pids():
        st = read_stat(pid)
        if st and st.pgid == pgid and st.state != "Z":
            out.append(pid)
    return out


def descendants(pid: int) -> list[int]:
    """Pids of the live (non-zombie) descendants of pid: its children, theirs and so on, in whatever
    group or session each put itself (one scan of the table; a process forked during it may be missed)."""
    children: dict[int, list[int]] = {}
    live = set()
    for p in all_pids():
        st = read_stat(p)
        if st:
            children.setdefault(st.ppid, []).append(p)
            if st.state != "Z":
                live.add(p)
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return [p for p in out if p in live]


def age_seconds(ticks: int) -> float:
    """Seconds since a process that started at `ticks` (clock ticks after boot) began."""
    uptime = float((PROC / "uptime").read_text().split()[0])
    return max(0.0, uptime - ticks / CLK_TCK)


def hostname() -> str:
    return socket.gethostname()


def ancestors(pid: int | None = None) -> set[int]:
    """pid (default: this process) and every parent up to PID 1."""
    pid = os.getpid() if pid is None else pid
    seen: set[int] = set()
    while pid > 0 and pid not in seen:
        seen.add(pid)
        st = read_stat(pid)
        pid = st.ppid if st else 0
    return seen


def open_fds(pid: int) -> Iterator[tuple[int, str]]:
    """(fd, link target) for each open descriptor of pid that we may read (own processes)."""
    base = PROC / str(pid) / "fd"
    try:
        entries = os.listdir(base)
    except OSError:
        return
    for entry in entries:
        try:
            yield int(entry), os.readlink(base / entry)
        except OSError:
            continue


def pids_with_file_open(path: Path) -> list[int]:
    """Pids (readable to us) that have `path` open, compared by device and inode."""
    try:
        want = os.stat(path)
    except FileNotFoundError:
        return []
    out = []
    for pid in all_pids():
        base = PROC / str(pid) / "fd"
        for fd, _ in open_fds(pid):
            try:
                st = os.stat(base / str(fd))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == (want.st_dev, want.st_ino):
                out.append(pid)
                break
    return out


def listeners() -> dict[int, tuple[str, int]]:
    """{socket inode: (local address, port)} of every listening TCP socket (IPv4 and IPv6)."""
    found: dict[int, tuple[str, int]] = {}
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            local, state, inode = f[1], f[3], int(f[9])
            addr_hex, _, port_hex = local.rpartition(":")
            if state == "0A":  # LISTEN
                found[inode] = (_decode_addr(addr_hex), int(port_hex, 16))
    return found


def listening_sockets(port: int) -> dict[int, str]:
    """{socket inode: local address} of TCP sockets listening on `port` (IPv4 and IPv6)."""
    return {inode: addr for inode, (addr, p) in listeners().items() if p == port}


def _decode_addr(addr_hex: str) -> str:
    raw = bytes.fromhex(addr_hex)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    # /proc/net/tcp6 stores four little-endian 32-bit words
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words)


def pids_with_sockets(inodes: set[int]) -> dict[int, list[int]]:
    """{socket inode: [pids holding it]} for the inodes given (only processes we may inspect)."""
    out: dict[int, list[int]] = {}
    for pid in all_pids():
        for _, target in open_fds(pid):
            if target.startswith("socket:["):
                inode = int(target[8:-1])
                if inode in inodes:
                    out.setdefault(inode, []).append(pid)
    return out


def marker_matches(marker: str | Path, *, open_files: bool = False) -> dict[int, str]:
    """{pid: how} for processes that reference the path `marker`, found by scanning /proc.

    A process matches when the marker path (a directory we created, e.g. a Ray temp dir) is on
    its command line, a path under it is in its environment, or its stdout/stderr is a file under
    it (Ray's workers rename themselves `ray::IDLE`, losing their argv, but log into the session
    dir). The marker itself as an environment value does not count: the driver exports its
    configuration (RAY_TEMP_DIR included) to everything it starts, Ray or not.
    With open_files=True any open file under the marker counts too. Matching is on the path we
    created, never on a process name; the marker must be followed by '/', '=', NUL, a space or
    the end, so /tmp/ray-ab never matches /tmp/ray-abc. This process and its ancestors never
    match (their own command line may name the marker).
    """
    text = str(marker).rstrip("/")
    pattern = re.compile(re.escape(os.fsencode(text)) + rb"(?![A-Za-z0-9._-])")
    under = re.compile(re.escape(os.fsencode(text + "/")))
    skip = ancestors()
    found: dict[int, str] = {}
    for pid in all_pids():
        if pid in skip:
            continue
        how = _match_one(pid, pattern, under=under, text=text, open_files=open_files)
        if how:
            found[pid] = how
    return found


def _match_one(pid: int, pattern: re.Pattern, under: re.Pattern, text: str, open_files: bool) -> str:
    for what, pat in (("cmdline", pattern), ("environ", under)):
        try:
            if pat.search((PROC / str(pid) / what).read_bytes()):
                return what
        except OSError:
            continue
    for fd, target in open_fds(pid):
        if (fd in (1, 2) or open_files) and (target == text or target.startswith(text + "/")):
            return f"fd {fd} -> {target}"
    return ""
