"""Process primitives and the run lock, with real processes (architecture §5).

Every process a test starts lives in its own process group; the `procs_env` fixture records
those groups and KILLs them in teardown (by group, never by name).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT
from fakes.procs import free_port

from pyhelpers.errors import ToolkitError
from pyhelpers.procs import family, groups, ports, procfs
from pyhelpers.run import lock

pytestmark = pytest.mark.heavy  # real process groups, stopped and killed

DRIVER = ROOT / "tests" / "support" / "proc_driver.sh"


class Groups:
    """Process groups started by a test, killed in teardown."""

    def __init__(self, pids_dir: Path):
        self.pids_dir, self.pgids, self.popens = pids_dir, set(), []

    def popen(self, argv, **kw) -> subprocess.Popen:
        p = subprocess.Popen(argv, start_new_session=True, stdin=subprocess.DEVNULL, **kw)
        self.pgids.add(p.pid)
        self.popens.append(p)
        return p

    def cleanup(self):
        for rec_file in self.pids_dir.glob("*.json") if self.pids_dir.is_dir() else ():
            try:
                self.pgids.add(json.loads(rec_file.read_text())["pid"])
            except (OSError, ValueError, KeyError):
                pass
        for pgid in self.pgids:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for p in self.popens:
            p.wait(timeout=10)


@pytest.fixture
def procs_env(toolkit_env, tmp_path):
    run_dir = tmp_path / "runs" / "r"
    env = {**toolkit_env, "RUN_DIR": str(run_dir), "STOP_GRACE": "1", "READY_BACKOFF_MAX": "0.2"}
    children = Groups(run_dir / "pids")
    yield env, run_dir, children
    children.cleanup()


def proc(args, env, timeout=30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pyhelpers", "proc", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def start(run_dir, env, name, *cmd, extra=()) -> subprocess.CompletedProcess:
    return proc(["start", "--pids-dir", str(run_dir / "pids"), "--logs-dir", str(run_dir / "logs"),
                 "--name", name, *extra, "--", *cmd], env)


def until(cond, timeout=300.0):  # a bound on a hang: a loaded machine starts processes late
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def gone(pid: int) -> bool:
    st = procfs.read_stat(pid)
    return st is None or st.state == "Z"


def test_group_with_grandchildren_is_gone_after_stop_and_nothing_leaks(procs_env):
    env, run_dir, _ = procs_env
    r, w = os.pipe()  # a caller's pipe: the service must not inherit it
    res = subprocess.run([sys.executable, "-m", "pyhelpers", "proc", "start", "--pids-dir",
                          str(run_dir / "pids"), "--logs-dir", str(run_dir / "logs"), "--name", "g", "--",
                          "bash", "-c", "sleep 300 & sleep 300 & wait"],
                         env=env, cwd=ROOT, capture_output=True, text=True, pass_fds=(w,), timeout=30)
    os.close(r), os.close(w)
    assert res.returncode == 0, res.stderr
    pid = int(res.stdout)
    rec = json.loads((run_dir / "pids" / "g.json").read_text())
    st = procfs.read_stat(pid)
    assert rec["pid"] == pid == st.pgid == st.sid  # the child itself, leader of its own session
    assert rec["start_ticks"] == st.start_ticks and rec["host"] == socket.gethostname()
    assert procfs.cmdline(pid) == "bash -c sleep 300 & sleep 300 & wait"
    until(lambda: len(procfs.group_members(pid)) == 3)
    members = procfs.group_members(pid)
    fds = dict(procfs.open_fds(pid))
    assert sorted(fds) == [0, 1, 2] and fds[0] == "/dev/null" and fds[1] == str(run_dir / "logs" / "g.log")

    again = start(run_dir, env, "g", "sleep", "1")
    assert again.returncode == 1
    assert f"service 'g' is already running: pid {pid}" in again.stderr

    res = proc(["stop", "--pids-dir", str(run_dir / "pids"), "--name", "g", "--grace", "5"], env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(f"g: pid {pid}: stopped (exited ")
    assert all(gone(m) for m in members), [procfs.read_stat(m) for m in members]
    assert not (run_dir / "pids" / "g.json").exists()


def test_stop_all_reverse_order_and_term_ignorer_killed_after_grace(procs_env):
    env, run_dir, _ = procs_env
    assert start(run_dir, env, "first", "sleep", "300").returncode == 0
    log = run_dir / "logs" / "stubborn.log"
    res = start(run_dir, env, "stubborn", "bash", "-c", 'trap "" TERM; sleep 300 & echo armed; wait')
    stubborn = int(res.stdout)
    # the trap is set once "armed" is logged; wait for it through the readiness wait itself
    res = proc(["wait", "--pids-dir", str(run_dir / "pids"), "--name", "stubborn", "--timeout", "10",
                "--backoff-max", "0.1", "--cmd", "--", "grep", "-q", "armed", str(log)], env)
    assert res.returncode == 0 and "stubborn: ready after" in res.stdout, res.stderr
    members = procfs.group_members(stubborn)
    res = proc(["stop", "--pids-dir", str(run_dir / "pids"), "--all", "--grace", "0.5"], env)
    lines = res.stdout.splitlines()
    assert res.returncode == 0, res.stderr
    assert lines[0].startswith(f"stubborn: pid {stubborn}: killed after 0.5 s")
    assert lines[1].startswith("first: pid ") and ": stopped (" in lines[1]
    assert all(gone(m) for m in members)
    assert list((run_dir / "pids").glob("*.json")) == []


# A service whose leader ends its own children, in its own order, and hangs when one of them was
# TERMed first: `ray start --block` drains its node through the GCS on TERM (ray/_private/node.py,
# 2.60.0), and a GCS TERMed with the group is not there to answer. The child dies of a TERM (no
# trap): with `trap "exit 0" TERM` it could still answer the leader's USR1 (a group TERM's trap
# runs only at bash's next safe point), and a fresh-clone suite found the group stopped, not hung.
ORDERLY = """
ack="$0"
bash -c 'trap "touch $0" USR1; while :; do sleep 0.1 & wait $!; done' "$ack" &
child=$!
trap 'kill -USR1 $child; until [[ -e $ack ]]; do sleep 0.05; done; kill $child; wait $child; exit 0' TERM
echo armed
while :; do sleep 0.1 & wait $!; done
"""


def test_a_service_that_stops_its_own_children_is_stopped_through_its_leader(procs_env, tmp_path):
    """Ray's head was killed after STOP_GRACE on every run: TERMed as a group, its `ray start` waited
    on a GCS that had already exited. A service recorded as stopping through its leader gets the
    TERM alone first; the rest of the group only if it is still there after the grace; a KILL, and
    its word, only when that fails too."""
    env, run_dir, _ = procs_env
    pids, logs = run_dir / "pids", run_dir / "logs"
    for name in ("orderly", "grouped"):
        groups.start(name, ["bash", "-c", ORDERLY, str(tmp_path / f"{name}.ack")], pids, logs,
                    stop_leader_first=(name == "orderly"))
        res = proc(["wait", "--pids-dir", str(pids), "--name", name, "--timeout", "30", "--backoff-max", "0.1",
                    "--cmd", "--", "grep", "-q", "armed", str(logs / f"{name}.log")], env)
        assert res.returncode == 0, res.stderr
        assert json.loads(groups.pidfile(pids, name).read_text())["stop_leader_first"] is (name == "orderly")
    # (a grace far above what it needs, for a loaded machine: the stop returns once the group is gone)
    orderly = groups.stop(groups.find(pids, "orderly"), 60, pids_dir=pids)
    assert orderly.outcome == "stopped" and "killed" not in orderly.message, orderly
    assert (tmp_path / "orderly.ack").exists()  # its child was asked, and answered, before it ended
    grouped = groups.stop(groups.find(pids, "grouped"), 0.5, pids_dir=pids)
    assert grouped.outcome == "killed" and "killed after 0.5 s" in grouped.message, grouped  # the group TERM's hang


def test_reused_pid_and_other_host_are_left_alone(procs_env):
    env, run_dir, children = procs_env
    other = children.popen(["sleep", "300"])  # not ours: same pid as the pidfile, other start time
    pids = run_dir / "pids"
    pids.mkdir(parents=True)
    fake = {"name": "old", "pid": other.pid, "start_ticks": procfs.start_ticks(other.pid) - 1,
            "host": socket.gethostname(), "argv": ["x"], "log": "x.log", "order": 1, "started_at": "t"}
    (pids / "old.json").write_text(json.dumps(fake))
    (pids / "far.json").write_text(json.dumps({**fake, "name": "far", "host": "elsewhere", "order": 2}))
    res = proc(["status", "--pids-dir", str(pids), "--json"], env)
    assert [(r["name"], r["state"]) for r in json.loads(res.stdout)] == [("old", "reused"), ("far", "other-host")]
    res = proc(["stop", "--pids-dir", str(pids), "--all", "--grace", "0.5"], env)
    assert res.returncode == 0, res.stderr
    assert f"far: pid {other.pid} was started on host elsewhere" in res.stdout
    assert f"old: pid {other.pid} reused by another process (sleep 300) — left alone" in res.stdout
    assert procfs.is_alive(other.pid)
    assert not (pids / "old.json").exists() and (pids / "far.json").exists()


def _driver(children, env, mode):
    return children.popen(["bash", str(DRIVER), mode], env=env, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)


def _take(env):
    return subprocess.run(["bash", str(DRIVER), "take"], env=env, capture_output=True, text=True, timeout=30)


def test_lock_refuses_second_holder_and_survives_sigkill_of_driver(procs_env):
    env, run_dir, children = procs_env
    driver = _driver(children, env, "hold")
    until(lambda: (run_dir / "hold.ready").exists())
    res = _take(env)
    assert res.returncode == 1
    assert "this run is already in progress" in res.stderr
    assert f"is held by pid {driver.pid} on host {socket.gethostname()} since " in res.stderr
    assert "tests/support/proc_driver.sh hold" in res.stderr and "make stop" in res.stderr

    svc = groups.find(run_dir / "pids", "svc")
    lock_file = run_dir / "lock"
    holders = procfs.pids_with_file_open(lock_file)  # only the driver's lock coprocess, not the service or child
    assert len(holders) == 1 and procfs.read_stat(holders[0]).ppid == driver.pid
    driver.send_signal(signal.SIGKILL)
    driver.wait(timeout=10)
    assert groups.state(svc) == "alive"
    assert procfs.group_members(driver.pid)  # the foreground child lives on, orphaned
    res = _take(env)
    assert res.returncode == 0, res.stderr
    assert f"taking over a stale run lock {lock_file}: its holder pid {driver.pid} on host" in res.stderr
    assert json.loads(lock_file.read_text())["command"].endswith("tests/support/proc_driver.sh take")

    res = proc(["stop", "--pids-dir", str(run_dir / "pids"), "--all", "--grace", env["STOP_GRACE"]], env)
    assert res.returncode == 0 and f"svc: pid {svc.pid}: stopped" in res.stdout, res.stderr


def test_no_child_of_a_killed_driver_keeps_the_lock(procs_env):
    env, run_dir, children = procs_env
    driver = _driver(children, env, "leak")
    until(lambda: (run_dir / "leak.ready").exists())
    children = [p for p in procfs.group_members(driver.pid) if p != driver.pid]
    driver.send_signal(signal.SIGKILL)
    driver.wait(timeout=10)
    until(lambda: not procfs.pids_with_file_open(run_dir / "lock"))  # the lock coprocess died with it
    assert any(procfs.is_alive(p) for p in children)  # the forked shell and its child live on
    res = _take(env)
    assert res.returncode == 0, res.stderr
    assert f"taking over a stale run lock {run_dir / 'lock'}: its holder pid {driver.pid}" in res.stderr


def test_stale_lock_file_is_taken_over_in_process(tmp_path):
    lock_file = tmp_path / "lock"
    lock_file.write_text(json.dumps({"pid": os.getpid(), "start_ticks": 1, "host": socket.gethostname(),
                                "since": "2026-01-01T00:00:00+00:00", "command": "bin/train"}))
    fd = os.open(lock_file, os.O_RDWR)
    try:
        note = lock.take(fd, lock_file, os.getpid())
        assert note.startswith(f"taking over a stale run lock {lock_file}: its holder pid {os.getpid()} ")
        assert "since 2026-01-01T00:00:00+00:00 (command: bin/train) is gone" in note
        info = lock.read_holder(lock_file)
        assert info["pid"] == os.getpid() and info["start_ticks"] == procfs.start_ticks(os.getpid())
        assert lock.take(fd, lock_file, os.getpid()) == ""  # the same holder again: nothing to say
    finally:
        os.close(fd)


def test_wait_times_out_with_log_tail_and_fails_fast_on_death(procs_env):
    env, run_dir, _ = procs_env
    start(run_dir, env, "slow", "bash", "-c", "for i in $(seq 1 40); do echo line$i; done; sleep 300")
    until(lambda: "line40" in (run_dir / "logs" / "slow.log").read_text())
    port = free_port()
    res = proc(["wait", "--pids-dir", str(run_dir / "pids"), "--name", "slow", "--timeout", "0.5",
                "--backoff-max", "0.1", "--knob", "SLOW_TIMEOUT", "--tcp", f"127.0.0.1:{port}"], env)
    assert res.returncode == 1
    assert "--- last 30 lines of the log of slow ---" in res.stderr
    assert "line40" in res.stderr and "line11" in res.stderr and "line10\n" not in res.stderr
    assert "is not ready after 0.5 s: last probe: tcp 127.0.0.1:" in res.stderr
    assert "raise SLOW_TIMEOUT" in res.stderr

    start(run_dir, env, "crash", "bash", "-c", "echo boom: bad flag >&2; exit 3")
    res = proc(["wait", "--pids-dir", str(run_dir / "pids"), "--name", "crash", "--timeout", "120",
                "--http", f"http://127.0.0.1:{port}/health"], env)
    assert res.returncode == 1
    assert "boom: bad flag" in res.stderr
    assert "service 'crash' (pid " in res.stderr and "exited before it was ready" in res.stderr


def test_http_ready_and_port_holders_named(procs_env):
    env, run_dir, _ = procs_env
    port = free_port()
    res = start(run_dir, env, "web", sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port),
                extra=("--needs-port", f"127.0.0.1:{port}"))
    web = int(res.stdout)
    res = proc(["wait", "--pids-dir", str(run_dir / "pids"), "--name", "web", "--timeout", "20",
                "--backoff-max", "0.2", "--http", f"http://127.0.0.1:{port}/"], env)
    assert res.returncode == 0 and "web: ready after" in res.stdout, res.stderr
    assert [h.pid for h in ports.who_holds_port(port)] == [web]
    res = start(run_dir, env, "web2", "sleep", "1", extra=("--needs-port", f"127.0.0.1:{port}"))
    assert res.returncode == 1
    assert f"port {port} is held by pid {web} ({sys.executable} -m http.server" in res.stderr
    assert "one of this run's own services" in res.stderr and not (run_dir / "pids" / "web2.json").exists()

    with socket.socket() as s:  # a port held by a process that is not ours: this test itself
        s.bind(("127.0.0.1", 0))
        s.listen()
        held = s.getsockname()[1]
        assert not ports.port_free("127.0.0.1", held)
        with pytest.raises(ToolkitError) as held_err:
            ports.check_port("127.0.0.1", held, knob="SHOPSIM_PORT")
        assert f"port {held} is held by pid {os.getpid()} (" in str(held_err.value) and "not ours" in str(held_err.value)
        assert "set SHOPSIM_PORT to a free port" in str(held_err.value)
    ports.check_port("127.0.0.1", held)  # free again: no error


def test_sweep_stops_processes_referencing_marker_only(procs_env, tmp_path):
    env, _, children = procs_env
    marker = tmp_path / "ray-ab"
    (marker / "logs").mkdir(parents=True)
    sleeper = [sys.executable, "-c", "import time; time.sleep(300)"]
    with open(marker / "logs" / "worker.out", "wb") as out:
        worker = children.popen(["sleep", "300"], stdout=out)  # like ray::IDLE: only its stdout tells
    by_argv = children.popen([*sleeper, f"--temp-dir={marker}"])
    by_env = children.popen(sleeper, env={**os.environ, "SESSION": f"{marker}/session_1"})
    decoy = children.popen([*sleeper, f"--temp-dir={marker}c"])  # /tmp/.../ray-abc is not ray-ab
    # Popen returns once the child's execve has switched to the new program, before the kernel has
    # set where its argv and environment lie: until then /proc/<pid>/cmdline and environ read empty.
    # At a load of 13 by_argv was still there when the scan ran (found 2 of 3). Wait for each one's.
    until(lambda: all(b"--temp-dir" in _raw_cmdline(p.pid) for p in (by_argv, decoy))
          and b"SESSION=" in _raw_proc(by_env.pid, "environ"))

    dry = "\n".join(r.message for r in family.stop_marked(marker, 2, dry_run=True))
    assert dry.count("would stop") == 3, dry
    assert procfs.is_alive(worker.pid)

    stopped = family.stop_marked(marker, 2)
    assert not any(r.outcome == "stuck" for r in stopped)
    res_stdout = "\n".join(r.message for r in stopped)
    assert f"pid {worker.pid} (sleep 300): stopped after TERM — fd 1 -> {marker}/logs/worker.out" in res_stdout
    assert f"pid {by_argv.pid} (" in res_stdout and "— cmdline" in res_stdout
    assert f"pid {by_env.pid} (" in res_stdout and "— environ" in res_stdout
    assert all(gone(p.pid) for p in (worker, by_argv, by_env))
    assert procfs.is_alive(decoy.pid) and str(decoy.pid) not in res_stdout


def _raw_proc(pid: int, what: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/{what}").read_bytes()
    except OSError:
        return b""


def _raw_cmdline(pid: int) -> bytes:
    return _raw_proc(pid, "cmdline")


def test_a_driver_killed_before_the_pidfile_leaves_no_unrecorded_service(tmp_path):
    """SIGKILL lands on the driver between the fork of a service and its pidfile: nothing may run
    that no pidfile names, since `make resume` stops only recorded groups (a converter in that
    window would write into the resumed run's export beside the resume's own)."""
    marker = tmp_path / "service-ran"
    driver = (
        "import os, signal, sys\n"
        "from pyhelpers.procs import groups\n"
        "groups.write_json_atomic = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)\n"
        f"groups.start('svc', ['sh', '-c', 'touch {marker}; sleep 30'], {str(tmp_path / 'pids')!r}, {str(tmp_path)!r})\n"
    )
    try:
        res = subprocess.run([sys.executable, "-c", driver], cwd=ROOT, timeout=30)
        assert res.returncode == -signal.SIGKILL
        assert list((tmp_path / "pids").glob("*.json")) == []
        # The event, not a fixed wait: the gated child (its command line names the marker) is gone,
        # having either run the service or, as it must, exited at the closed gate.
        def gated_child() -> list[int]:
            return [pid for pid in procfs.all_pids() if str(marker).encode() in _raw_cmdline(pid)]

        deadline = time.monotonic() + 60
        while gated_child() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not gated_child(), "the gated child never exited"
        assert not marker.exists(), "a service no pidfile names ran after its driver died"
    finally:
        family.stop_marked(marker, grace=0)  # the service, if it ran (its command line names the marker)
