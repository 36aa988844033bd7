"""Waiting until a service answers: probes, a deadline, exponential backoff (architecture §5).

A probe is any callable returning (ready, detail) — `detail` says what the last attempt saw
("connection refused", "HTTP 503"). Built-in probes: HTTP status, TCP connect, a command's exit
status. Later issues plug in their own (ShopSimulator's no-slot probe) by passing a callable.

`wait_ready` sleeps 0.1 s, then doubles up to `backoff_max`, and gives up at the deadline or as
soon as `alive()` says the process died. Hand-written rather than tenacity (not in the venv):
the loop is a dozen lines and must also watch the process, which tenacity has no notion of.
"""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from pyhelpers.errors import ToolkitError
from pyhelpers.procs import groups

Probe = Callable[[], tuple[bool, str]]
TAIL_LINES = 30


class NotReady(ToolkitError):
    """The service did not answer: reason is 'timeout' or 'died'; detail is the last probe's."""

    def __init__(self, reason: str, detail: str, what: str, where: str, fix: str):
        self.reason, self.detail = reason, detail
        self.log_tail: list[str] = []
        super().__init__(what, where, fix)


# A direct opener: a loopback probe must never go through http_proxy from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_probe(url: str, expect_status: int = 200, timeout: float = 2.0,
               headers: Callable[[], dict[str, str]] = dict) -> Probe:
    """Ready when GET url answers with expect_status. headers() is read at each probe (a token
    file the service's start makes)."""
    def probe() -> tuple[bool, str]:
        try:
            with _OPENER.open(urllib.request.Request(url, method="GET", headers=headers()), timeout=timeout) as resp:
                code = resp.status
        except urllib.error.HTTPError as exc:
            code = exc.code
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            return False, f"GET {url}: {reason}"
        return code == expect_status, f"GET {url}: HTTP {code} (want {expect_status})"
    return probe


def tcp_probe(host: str, port: int, timeout: float = 1.0) -> Probe:
    """Ready when a TCP connection to (host, port) succeeds."""
    def probe() -> tuple[bool, str]:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return True, f"tcp {host}:{port}: connected"
        except OSError as exc:
            return False, f"tcp {host}:{port}: {exc.strerror or exc}"
    return probe


def all_of(*probes: Probe) -> Probe:
    """Ready when every probe is, checked in order (the first not ready says why)."""
    def probe() -> tuple[bool, str]:
        said = []
        for p in probes:
            ok, msg = p()
            said.append(msg)
            if not ok:
                return False, msg
        return True, "; ".join(said)
    return probe


def cmd_probe(argv: list[str], timeout: float = 10.0) -> Probe:
    """Ready when the command exits 0 (its output is discarded)."""
    def probe() -> tuple[bool, str]:
        try:
            rc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, timeout=timeout, check=False).returncode
        except subprocess.TimeoutExpired:
            return False, f"{argv[0]}: no answer within {timeout:g} s"
        except OSError as exc:
            return False, f"{argv[0]}: {exc.strerror}"
        return rc == 0, f"{argv[0]}: exit {rc}"
    return probe


def wait_ready(probe: Probe, *, timeout: float, backoff_max: float,
               alive: Callable[[], bool] | None = None, first_delay: float = 0.1,
               clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> float:
    """Probe until ready; return the seconds it took. Raises NotReady('died' | 'timeout')."""
    t0 = clock()
    deadline, delay, detail = t0 + timeout, first_delay, "not probed yet"
    while True:
        ok, detail = probe()
        if alive is not None and not alive():  # checked after the probe: an answer from a
            if ok:                              # dead service's port came from someone else
                detail += " — but from another process"
            raise NotReady("died", detail, what="the process exited before it was ready", where="", fix="")
        if ok:
            return clock() - t0
        left = deadline - clock()
        if left <= 0:
            raise NotReady("timeout", detail, what=f"not ready within {timeout:g} s", where="", fix="")
        sleep(min(delay, left))
        delay = min(delay * 2, backoff_max)


def wait_service(pids_dir: Path, name: str, probe: Probe, *, timeout: float, backoff_max: float,
                 knob: str = "") -> float:
    """wait_ready for a recorded service: fails fast when its group dies. The NotReady raised
    names the service, its log and the fix, and carries the log's last lines in .log_tail."""
    rec = groups.find(pids_dir, name)
    try:
        return wait_ready(probe, timeout=timeout, backoff_max=backoff_max,
                          alive=lambda: groups.state(rec) == "alive")
    except NotReady as exc:
        if exc.reason == "died":
            what = f"service {name!r} (pid {rec.pid}) exited before it was ready"
            fix = "read the log lines above for its error, fix it, then start again"
        else:
            what = f"service {name!r} (pid {rec.pid}) is not ready after {timeout:g} s"
            slower = f"; if it is only slow, raise {knob}" if knob else ""
            fix = f"read the log lines above: it is still starting or hung{slower}"
        err = NotReady(exc.reason, exc.detail, what=what, where=f"last probe: {exc.detail}; log {rec.log}", fix=fix)
        err.log_tail = groups.log_tail(rec.log, TAIL_LINES)
        raise err from None
