"""Ports for tests, claimed machine-wide so that no two claimants ever get the same one.

    port = claim_port()            # one free port below the kernel's ephemeral range
    base = claim_block(10)         # ten consecutive free ports (a Ray port block)

Claimants that run at once on one machine: the xdist workers of one `make test`, another
checkout's `make test`, a `make rehearse` beside them. A port being free when it is drawn is not
enough: two workers can draw the same free port before either binds it. So every drawn port is
also claimed: a file <CLAIMS>/<port> made with O_EXCL, holding the claimant's pid and its start
time. A claim is released when its process exits (atexit), and a claim whose process is gone (a
worker killed by a timeout) is stale and taken over. Every claim and takeover happens under one
flock, so a takeover can never hand one port to two claimants.

Never drawn: the ephemeral range (an outgoing connection may take such a port between the draw
and the bind), and the ports a user's own run or rehearsal uses by default (env/defaults.env and
the rehearsal's scale table: its services may be between two starts when the port is drawn).
"""

from __future__ import annotations

import atexit
import fcntl
import os
import random
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CLAIMS = Path(tempfile.gettempdir()) / "shopsimrl-test-port-claims"
LOW = 20000  # below: well-known and registered services a developer's machine may run
PORT_KNOBS = ("SHOPSIM_PORT", "EVAL_PORT", "RAY_DASHBOARD_PORT", "RAY_PORT")

_mine: set[int] = set()


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _defaults_in_use() -> set[int]:
    """The ports of a user's run and rehearsal with default settings (RAY_PORT: its whole block)."""
    from fakes.rehearsal import PORTS

    from pyhelpers.config.load import read_knobs
    from pyhelpers.config.ray_ports import SPAN

    knobs = read_knobs()
    out: set[int] = set()
    for source in ({k: knobs[k].default for k in PORT_KNOBS}, {k: PORTS[k] for k in PORT_KNOBS}):
        for name, value in source.items():
            port = int(value)
            out.update(range(port, port + (SPAN if name == "RAY_PORT" else 1)))
    return out


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _me() -> str:
    return f"{os.getpid()} {_start_time(os.getpid())}"


def _stale(path: Path) -> bool:
    """The claimant of this claim file is gone (or the file is unreadable garbage)."""
    try:
        pid, start = path.read_text().split()
    except (OSError, ValueError):
        return True
    return _start_time(int(pid)) != start


@contextmanager
def _locked() -> Iterator[None]:
    CLAIMS.mkdir(mode=0o777, exist_ok=True)
    with open(CLAIMS / ".lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _free(port: int) -> bool:
    from pyhelpers.procs.ports import port_free

    return port_free("127.0.0.1", port)


def claim_block(n: int = 1) -> int:
    """The first of `n` consecutive ports, each free now and claimed by this process until it exits."""
    rng = random.SystemRandom()
    avoid = _defaults_in_use()
    high = _ephemeral_low()
    with _locked():
        for _ in range(10_000):
            base = rng.randrange(LOW, high - n)
            span = range(base, base + n)
            if avoid.intersection(span):
                continue
            files = [CLAIMS / str(p) for p in span]
            if any(f.exists() and not _stale(f) for f in files) or not all(_free(p) for p in span):
                continue
            for f in files:
                f.write_text(_me())
            _mine.update(span)
            return base
    raise RuntimeError(f"no {n} consecutive free ports between {LOW} and {high} (claims: {CLAIMS})")


def claim_port() -> int:
    return claim_block(1)


@atexit.register
def _release() -> None:
    me = _me()
    for port in _mine:
        path = CLAIMS / str(port)
        try:
            if path.read_text() == me:
                path.unlink()
        except OSError:
            pass
