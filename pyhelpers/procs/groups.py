"""Services in their own process groups: start with a pidfile, stop the group, report (architecture §5).

A service is started with `start()`: its own session (setsid, so pid == process group id == session
id), stdin from /dev/null, stdout+stderr appended to `<logs>/<name>.log`, and no inherited
descriptors except 0-2 (close_fds), so neither the run lock nor a caller's pipe leaks into it. The
pid comes from the fork itself (Popen), never from a wrapper's `$!` (the gate below execs the
service, which keeps that pid). The pidfile `<pids>/<name>.json` records name, pid (== pgid), start
time in clock ticks (so a reused pid is never mistaken for ours), host, argv, log path and start
order. The child waits at a gate (a pipe) until its pidfile is written: a caller killed in between
closes the pipe and the child exits, so nothing runs that no pidfile names (`make resume` stops only
recorded groups).

`stop()` TERMs the whole group, waits until no non-zombie member remains, KILLs the group after
the grace period and says which happened. A service whose own process ends its group in its own
order (recorded with stop_leader_first: `ray start --block`, which stops its raylet, GCS and the
rest as `ray stop` does) gets that TERM alone first, the group's only if members remain after the
grace. `stop_all()` does that in reverse start order.
Processes that no pidfile names (Ray's workers, a process's own descendants) are family.py's.
Nothing is ever signalled by name.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from pyhelpers.errors import ToolkitError
from pyhelpers.jsonfiles import write_json_atomic
from pyhelpers.procs import ports, procfs

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
KILL_WAIT_S = 5.0  # after KILL the kernel ends a group at once, unless a member sits in state D
POLL_S = 0.05


@dataclass(frozen=True)
class Record:
    """One pidfile: a service we started."""

    name: str
    pid: int  # == process group id == session id
    start_ticks: int
    host: str
    argv: list[str]
    log: str
    order: int
    started_at: str  # for people; ownership is decided by start_ticks
    # Its leader ends its own group, in its own order (`ray start --block`): stop() TERMs the leader
    # alone first (stop_group). False in pidfiles written before the field existed.
    stop_leader_first: bool = False

    @property
    def pgid(self) -> int:
        return self.pid


@dataclass(frozen=True)
class StopResult:
    name: str
    pid: int
    outcome: str  # stopped | killed | gone | reused | other-host | stuck | would-stop
    message: str


def pidfile(pids_dir: Path, name: str) -> Path:
    return Path(pids_dir) / f"{name}.json"


def load(path: Path) -> Record:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return Record(**{k: data[k] for k in Record.__dataclass_fields__ if k in data})
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ToolkitError(f"unreadable pidfile ({exc})", str(path),
                           "check whether that process still runs (`pyhelpers proc status`), then "
                           "delete the file") from None


def records(pids_dir: Path) -> list[Record]:
    """Every pidfile in pids_dir, in start order."""
    d = Path(pids_dir)
    if not d.is_dir():
        return []
    return sorted((load(p) for p in d.glob("*.json")), key=lambda r: (r.order, r.name))


def find(pids_dir: Path, name: str) -> Record:
    path = pidfile(pids_dir, name)
    if not path.exists():
        raise ToolkitError(f"no service named {name!r} was started", str(path),
                           f"start it first; `pyhelpers proc status --pids-dir {pids_dir}` lists what runs")
    return load(path)


def live_pids(pids_dir: Path) -> set[int]:
    """Every process of the recorded services that are alive: a port one of them holds is ours."""
    return {p for r in records(pids_dir) if state(r) == "alive" for p in procfs.group_members(r.pgid)}


def state(rec: Record) -> str:
    """alive | dead | reused | other-host.

    alive: the leader runs with the recorded start time, or it is gone but members of its group
    remain (the kernel does not hand out a pid while a group of that id exists, so they are ours).
    reused: the pid now belongs to a process that started at another time.
    """
    if rec.host != procfs.hostname():
        return "other-host"
    st = procfs.read_stat(rec.pid)
    if st and st.start_ticks != rec.start_ticks:
        return "reused"
    if st and st.state != "Z":
        return "alive"
    return "alive" if procfs.group_members(rec.pgid) else "dead"


def _check_name(name: str) -> None:
    if not NAME_RE.match(name):
        raise ToolkitError(f"bad service name {name!r}", "--name",
                           "use letters, digits, '.', '_' and '-' (at most 64), e.g. shopsim")


def start(name: str, argv: list[str], pids_dir: Path, logs_dir: Path, *,
          env: Mapping[str, str] | None = None, cwd: Path | None = None,
          needs_ports: Iterable[tuple[str, int]] = (), stop_leader_first: bool = False,
          stop_with: str = "make stop") -> Record:
    """Start argv as service `name`; return its record once the pidfile is written.

    Refuses when a live service is recorded under the same name, or when a port in needs_ports
    cannot be bound (the error names the holder, and `stop_with`, the command that stops this
    run's own services where the caller runs). env=None passes this process's environment.
    stop_leader_first: the service's own process ends its group (Record.stop_leader_first).
    """
    return spawn(name, argv, pids_dir=pids_dir, logs_dir=logs_dir, env=env, cwd=cwd, needs_ports=needs_ports,
                 stop_leader_first=stop_leader_first, stop_with=stop_with)[0]


def refuse_running(name: str, pids_dir: Path, stop_with: str = "make stop") -> None:
    """Refused, naming `stop_with`, when a live service is recorded as `name` in pids_dir."""
    old = next((r for r in records(Path(pids_dir)) if r.name == name), None)
    if old and state(old) == "alive":
        raise ToolkitError(f"service {name!r} is already running", f"pid {old.pid} ({pidfile(Path(pids_dir), name)})",
                           f"stop it first: `{stop_with}`, or pyhelpers proc stop --name {name}")


def spawn(name: str, argv: list[str], pids_dir: Path, logs_dir: Path, *,
          env: Mapping[str, str] | None = None, cwd: Path | None = None,
          needs_ports: Iterable[tuple[str, int]] = (), stop_leader_first: bool = False,
          stop_with: str = "make stop") -> tuple[Record, subprocess.Popen]:
    """`start()`, also returning the Popen, for a caller that waits for the service itself."""
    _check_name(name)
    if not argv:
        raise ToolkitError("no command given", f"service {name}", "put the command after `--`")
    pids_dir, logs_dir = Path(pids_dir), Path(logs_dir)
    path = pidfile(pids_dir, name)
    existing = records(pids_dir)
    refuse_running(name, pids_dir, stop_with)
    ours = live_pids(pids_dir)
    for host, port in needs_ports:
        ports.check_port(host, port, ours=ours, stop_with=stop_with)
    pids_dir.mkdir(parents=True, exist_ok=True)
    logs_dir.mkdir(parents=True, exist_ok=True)
    log_path = logs_dir / f"{name}.log"
    started_at = datetime.now().astimezone().isoformat(timespec="seconds")
    _check_program(name, argv[0], env=env, cwd=cwd)  # the gate's exec would only say so in the log
    gate_r, gate_w = os.pipe()
    with open(log_path, "ab") as log:
        log.write(f"==> {started_at} start {name}: {' '.join(argv)}\n".encode())
        log.flush()
        try:
            child = subprocess.Popen([BASH, "-c", _GATE.format(fd=gate_r), argv[0], *argv],
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True, close_fds=True, pass_fds=(gate_r,), env=env, cwd=cwd)
        except OSError as exc:
            os.close(gate_w)
            raise ToolkitError(f"cannot start {argv[0]!r} ({exc.strerror})", f"service {name}",
                               "check the program path / PATH and the knob that names it") from None
        finally:
            os.close(gate_r)
    try:
        # The child is our unreaped child until we exit, so its stat (even as a zombie) is readable;
        # exec keeps its pid and start time.
        ticks = procfs.start_ticks(child.pid)
        rec = Record(name=name, pid=child.pid, start_ticks=ticks or 0, host=procfs.hostname(),
                     argv=list(argv), log=str(log_path), order=max((r.order for r in existing), default=0) + 1,
                     started_at=started_at, stop_leader_first=stop_leader_first)
        write_json_atomic(path, asdict(rec))
        os.write(gate_w, b"\n")  # recorded: the child may exec the service
    finally:
        os.close(gate_w)  # without the newline (we failed or died first), the child exits 111
    return rec, child


# bash (not sh): `read -u` and closing a descriptor above 9 are bash's. The gate's descriptor is
# closed before the exec, so the service never holds it.
BASH = shutil.which("bash") or "/bin/bash"
_GATE = 'read -r -u {fd} _ || exit 111; exec {fd}<&-; exec "$@"'


def _check_program(name: str, program: str, *, env: Mapping[str, str] | None, cwd: Path | None) -> None:
    """What Popen would refuse, refused before the gate: a program that is not there to exec."""
    if "/" in program:
        found = Path(cwd or ".", program)
        ok = found.is_file() and os.access(found, os.X_OK)
    else:
        ok = shutil.which(program, path=(os.environ if env is None else env).get("PATH", os.defpath)) is not None
    if not ok:
        raise ToolkitError(f"cannot start {program!r} (not found or not executable)", f"service {name}",
                           "check the program path / PATH and the knob that names it")


def stop_group(pgid: int, grace: float, leader_first: bool = False) -> tuple[str, str]:
    """TERM the group, wait up to `grace` s for every non-zombie member to exit, then KILL.
    leader_first: TERM the leader (pid == pgid) alone and give it `grace` s to end its group its
    own way; whatever is left then gets the group's TERM and the grace again. Returns (outcome,
    detail): stopped | killed | gone | stuck."""
    if not procfs.group_members(pgid):
        return "gone", ""
    t0 = time.monotonic()
    waited, how = grace, "TERM"
    if leader_first and _signal_leader(pgid, signal.SIGTERM):
        if _wait_group(pgid, t0 + grace):
            return "stopped", f"exited {time.monotonic() - t0:.1f} s after TERM"
        waited, how = 2 * grace, "TERM to its leader, then to the group"
    if not _killpg(pgid, signal.SIGTERM) or _wait_group(pgid, time.monotonic() + grace):
        return "stopped", f"exited {time.monotonic() - t0:.1f} s after TERM"
    _killpg(pgid, signal.SIGKILL)
    if _wait_group(pgid, time.monotonic() + KILL_WAIT_S):
        return "killed", f"after {waited:g} s: still running after {how}"
    left = procfs.group_members(pgid)
    states = ", ".join(f"{p} [{getattr(procfs.read_stat(p), 'state', '?')}]" for p in left)
    return "stuck", f"still alive after KILL: {states}"


def _signal_leader(pgid: int, sig: int) -> bool:
    """Signal the group's leader (pid == pgid) when it is still a live member (not a zombie)."""
    st = procfs.read_stat(pgid)
    if not st or st.state == "Z" or st.pgid != pgid:
        return False
    try:
        os.kill(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def _killpg(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        raise ToolkitError(f"not allowed to signal process group {pgid}", f"pgid {pgid}",
                           "it belongs to another user; stop it as that user") from None
    return True


def _wait_group(pgid: int, deadline: float) -> bool:
    while procfs.group_members(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True


def stop(rec: Record, grace: float, *, pids_dir: Path | None = None, dry_run: bool = False) -> StopResult:
    """Stop one recorded service if it is still ours; remove its pidfile once its group is gone."""
    st = state(rec)
    head = f"{rec.name}: pid {rec.pid}"
    if st == "other-host":
        return StopResult(rec.name, rec.pid, outcome="other-host",
                          message=f"{head} was started on host {rec.host}, not {procfs.hostname()} — left alone")
    if st == "reused":
        msg = f"{head} reused by another process ({procfs.cmdline(rec.pid)}) — left alone"
        outcome = "reused"
    elif dry_run:
        return StopResult(rec.name, rec.pid, outcome="would-stop" if st == "alive" else "gone",
                          message=f"{head}: would stop (TERM, KILL after the grace)" if st == "alive"
                          else f"{head}: already gone")
    else:
        outcome, detail = stop_group(rec.pgid, grace, rec.stop_leader_first) if st == "alive" else ("gone", "")
        msg = {"stopped": f"{head}: stopped ({detail})", "gone": f"{head}: already gone",
               "killed": f"{head}: killed {detail}",
               "stuck": f"{head}: {detail} (a member in state D waits in the kernel, e.g. on a GPU "
                        f"driver; see `ps -o pid,stat,wchan -g {rec.pgid}`)"}[outcome]
    if outcome != "stuck" and not dry_run and pids_dir is not None:
        pidfile(pids_dir, rec.name).unlink(missing_ok=True)
    return StopResult(rec.name, rec.pid, outcome=outcome, message=msg)


def stop_all(pids_dir: Path, grace: float, names: Iterable[str] | None = None,
             dry_run: bool = False, missing_ok: bool = False) -> list[StopResult]:
    """Stop the recorded services (all, or those named) in reverse start order. A named service
    never started is an error, or skipped with missing_ok."""
    recs = records(pids_dir)
    if names is not None:
        wanted = list(names)
        for n in wanted:
            _check_name(n)
        known = {r.name for r in recs}
        missing = [n for n in wanted if n not in known]
        if missing and not missing_ok:
            raise ToolkitError(f"no pidfile for {', '.join(missing)}", str(pids_dir),
                               f"`pyhelpers proc status --pids-dir {pids_dir}` lists what was started")
        recs = [r for r in recs if r.name in wanted]
    return [stop(r, grace, pids_dir=pids_dir, dry_run=dry_run) for r in reversed(recs)]


def status(pids_dir: Path) -> list[dict]:
    """One row per pidfile: name, pid, state, age_s (None unless alive), log."""
    rows = []
    for r in records(pids_dir):
        st = state(r)
        age = procfs.age_seconds(r.start_ticks) if st == "alive" else None
        rows.append({"name": r.name, "pid": r.pid, "state": st, "age_s": age, "log": r.log,
                     "order": r.order})
    return rows


def log_tail(path: str | Path, lines: int = 30) -> list[str]:
    """The last `lines` lines of a log (reads at most the last 256 KiB)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 256 * 1024))
            data = fh.read()
    except OSError:
        return []
    return data.decode("utf-8", "replace").splitlines()[-lines:]
