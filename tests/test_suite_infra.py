"""The suite's own machinery (README "Tests"): ports no two claimants share, never a user's
defaults, and a shared reference no test may write into."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from support.rehearsal import own_ports

from pyhelpers.config.declarations import read_knobs
from pyhelpers.procs import procfs

# A process whose port draws are scripted: random.SystemRandom replaced by one drawing from a seed,
# so two processes draw the same ports in the same order, as two unlucky workers would.
SCRIPTED = """
import json, random, sys
sys.path[:0] = [{tests!r}, {root!r}]
random.SystemRandom = lambda: random.Random(7)
from support.rehearsal import own_ports
print(json.dumps(own_ports()), flush=True)
sys.stdin.read()  # hold the ports until the test is done
"""


def test_two_processes_drawing_the_same_ports_never_get_the_same_one(monkeypatch):
    other = subprocess.Popen([sys.executable, "-c", SCRIPTED.format(tests=str(ROOT / "tests"), root=str(ROOT))],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        theirs = json.loads(other.stdout.readline())
        monkeypatch.setattr(random, "SystemRandom", lambda: random.Random(7))
        mine = own_ports()
    finally:
        other.communicate("", timeout=60)

    def taken(ports):
        out = set()
        for name, port in ports.items():
            out.update(range(int(port), int(port) + (10 if name == "RAY_PORT" else 1)))
        return out

    assert not taken(theirs) & taken(mine), (theirs, mine)


class _Draws:
    """randrange answers these, in turn, then anything."""

    def __init__(self, first):
        self.first = list(first)
        self.rest = random.Random(3)

    def randrange(self, a, b):
        return self.first.pop(0) if self.first else self.rest.randrange(a, b)


def test_a_users_run_and_rehearsal_defaults_are_never_drawn(monkeypatch):
    from fakes.rehearsal import PORTS

    defaults = [int(read_knobs()[k].default) for k in ("SHOPSIM_PORT", "EVAL_PORT", "RAY_DASHBOARD_PORT", "RAY_PORT")]
    rehearsal = [int(PORTS[k]) for k in ("SHOPSIM_PORT", "EVAL_PORT", "RAY_DASHBOARD_PORT", "RAY_PORT")]
    below = [p for p in defaults + rehearsal if p >= 20000]  # the ones the draw range holds
    assert below, "no default lies in the drawn range any more: draw them on purpose below"
    # Every draw first lands on a default (RAY_PORT's block: its first port and one inside it).
    draws = [p for p in below for _ in range(4)] + [int(PORTS["RAY_PORT"]) + 5] * 4
    monkeypatch.setattr(random, "SystemRandom", lambda: _Draws(draws))
    got = own_ports()
    ray = int(PORTS["RAY_PORT"])
    for name, port in got.items():
        span = range(int(port), int(port) + (10 if name == "RAY_PORT" else 1))
        assert not set(span) & (set(below) | set(range(ray, ray + 10))), (name, port)


def test_a_test_that_writes_into_the_shared_reference_fails_naming_the_file(tmp_path):
    from support.shared import untouched

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "events.jsonl").write_text("{}\n")
    with untouched([tmp_path / "run"], "the reference"):  # reading is fine
        (tmp_path / "run" / "events.jsonl").read_text()
    with pytest.raises(AssertionError, match=r"wrote into the reference.*report\.html"):
        with untouched([tmp_path / "run"], "the reference"):
            (tmp_path / "run" / "report.html").write_text("<html>")


# A module whose tests share a module-scoped fixture (a server it starts once), as test_eval's and
# the two-node tests' do: conftest marks them one xdist group, so one worker starts it once.
GROUPED = """
import os, time
import pytest

@pytest.fixture(scope="module")
def server():
    return os.environ["PYTEST_XDIST_WORKER"]

@pytest.mark.parametrize("i", range(6))
def test_uses_the_server(server, i):
    time.sleep(0.2)  # long enough that an idle worker would take the next test
    with open(os.environ["WORKERS_SEEN"], "a") as f:
        f.write(server + " " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""


@pytest.mark.heavy  # a pytest of its own on three xdist workers (about 5 s of both cores)
def test_a_modules_tests_sharing_a_module_fixture_run_on_one_worker(tmp_path):
    # pytest 9.2 with xdist 3.8 dropped xdist_group silently (pytest-dev/pytest-xdist#1386): each
    # worker then built its own copy of every module fixture (three two-node rehearsals, not one).
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    seen = tmp_path / "seen.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests"), "WORKERS_SEEN": str(seen)}
    res = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q",
                          "-n", "3", "--dist", "loadgroup", "--no-loadscope-reorder", "--rootdir", str(tmp_path),
                          str(tmp_path / "test_grouped.py")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    lines = seen.read_text().split()
    assert len(lines) == 12 and len(set(lines)) == 1, f"the module's tests ran on workers {sorted(set(lines))}"



def test_the_environ_watch_records_a_holder_as_what_it_runs_after_its_exec(tmp_path):
    """A service starts as a bash start gate that execs the service (same pid, same environment).
    Caught before the exec, a holder used to be kept as that bash, whose long command line is cut
    before the service's name, and the secret test flagged the analyst (a fresh-clone CI, 2026-12-05)."""
    import time

    from support.reference import EnvironWatch

    secret = "not-a-real-key-0123456789"
    gate = 'read -r _ || exit 111; exec "$@"'  # as procs' start gate: wait for "go", then exec the service
    service = [sys.executable, "-c", "import time; time.sleep(30)", "pyhelpers", "analyst", "run"]
    # bash's $0 stands for the long paths before the service's name on a real gate's command line
    proc = subprocess.Popen(["bash", "-c", gate, "/gate" + "x" * 200, *service], stdin=subprocess.PIPE,
                            env={**os.environ, "RUNS_DIR": str(tmp_path), "THE_KEY": secret})
    watch = EnvironWatch(f"RUNS_DIR={tmp_path}", {"THE_KEY": secret})
    try:
        time.sleep(0.3)
        watch.scan()
        assert watch.holders["THE_KEY"][proc.pid][0].startswith("bash")  # caught before the exec
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and "bash" in watch.holders["THE_KEY"][proc.pid][0]:
            time.sleep(0.1)
            watch.scan()
        assert "pyhelpers analyst run" in watch.holders["THE_KEY"][proc.pid][0]
    finally:
        proc.kill()
        proc.wait()


def test_the_environ_watch_keeps_a_holders_command_while_it_exits(tmp_path, monkeypatch):
    """A holder read while it exits has its environment still readable but no command line any
    more (procfs.cmdline then gives "[python]", its comm): the analyst stopped at the end of round 1
    was recorded as "[python]" child of the loop, and the secret test flagged it (a fresh-clone CI,
    2026-12-05, after the exec fix above)."""
    import time

    from support.reference import EnvironWatch

    from pyhelpers.procs import procfs

    secret = "not-a-real-key-0123456789"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "pyhelpers", "analyst", "run"],
                            env={**os.environ, "RUNS_DIR": str(tmp_path), "THE_KEY": secret})
    watch = EnvironWatch(f"RUNS_DIR={tmp_path}", {"THE_KEY": secret})
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.pid not in watch.holders.get("THE_KEY", {}):
            time.sleep(0.05)
            watch.scan()
        assert "pyhelpers analyst run" in watch.holders["THE_KEY"][proc.pid][0]
        # the exit's window, where the kernel has dropped its command line: what a zombie shows
        monkeypatch.setattr(procfs, "cmdline", lambda pid, limit=200: "[python]")
        watch.scan()
        assert "pyhelpers analyst run" in watch.holders["THE_KEY"][proc.pid][0]
    finally:
        proc.kill()
        proc.wait()


def test_a_zombie_has_no_command_line_to_read(tmp_path):
    """What the test above models: an ended, unreaped process's /proc/<pid>/cmdline reads empty."""
    import time

    from pyhelpers.procs import procfs

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while (st := procfs.read_stat(proc.pid)) and st.state != "Z" and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert procfs.read_stat(proc.pid).state == "Z"
        assert (Path("/proc") / str(proc.pid) / "cmdline").read_bytes() == b""
        assert procfs.cmdline(proc.pid).startswith("[python")  # its comm, as the watch then reads it
    finally:
        proc.wait()


def test_the_environ_watch_names_a_holder_first_caught_in_its_exit_by_its_last_command(tmp_path, monkeypatch):
    """A short-lived holder (a `pyhelpers run log-wandb`) may be first caught holding its key in
    its exit: it is named by the command line an earlier scan read, not by its comm."""
    import time

    from support.reference import EnvironWatch

    from pyhelpers.procs import procfs

    secret = "not-a-real-key-0123456789"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "pyhelpers", "run", "log-wandb"],
                            env={**os.environ, "RUNS_DIR": str(tmp_path), "THE_KEY": secret})
    known: dict[str, str] = {}  # the watch learns of the key only later (as of the run's Ray token)
    watch = EnvironWatch(f"RUNS_DIR={tmp_path}", {}, lambda: known)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.pid not in watch.members:
            time.sleep(0.05)
            watch.scan()
        assert proc.pid in watch.members and not watch.holders
        known["THE_KEY"] = secret
        monkeypatch.setattr(procfs, "cmdline", lambda pid, limit=200: "[python]")  # its exit's window
        watch.scan()
        assert "pyhelpers run log-wandb" in watch.holders["THE_KEY"][proc.pid][0]
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.heavy  # bin/test's lint and a pytest of its own
def test_the_suites_processes_cache_their_bytecode_whatever_the_machine_says(tmp_path):
    # A machine-wide PYTHONDONTWRITEBYTECODE=1 made every python process the suite starts compile
    # pyhelpers again (the fast lane: 67 s on 2 quiet cores, 50 s with the cache).
    (tmp_path / "test_bytecode.py").write_text("import sys\n\n\ndef test_caches():\n    assert not sys.dont_write_bytecode\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env.update(PYTHONDONTWRITEBYTECODE="1", TEST_WORKERS="1")
    res = subprocess.run([str(ROOT / "bin" / "test"), "-p", "no:cacheprovider", "-q", "--rootdir", str(tmp_path),
                          str(tmp_path / "test_bytecode.py")], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0 and "1 passed" in res.stdout, res.stdout[-3000:] + res.stderr[-3000:]


def test_the_session_removes_its_rehearsals_ray_temp_dirs_once_nothing_uses_them(tmp_path, monkeypatch):
    """Each full suite left 50-80 /tmp/ray-<hash> dirs of its rehearsals' Ray sessions (a few MB each)
    behind. At the session's end (conftest) the ones of this session's rehearsals go, once no process
    uses them; a rehearsal kept for other workers' reading (keep_ray_temp) and a dir in use stay. A
    run its environment does not name (`make smoke` runs RUN_NAME=smoke in the rehearsal's RUNS_DIR)
    is found by its run dir."""
    from support import rehearsal

    monkeypatch.setattr(rehearsal, "_ray_temps", set())
    monkeypatch.setattr(rehearsal, "_ray_envs", [], raising=False)
    world = tmp_path / "world"
    done, busy = (rehearsal.rehearse_env(tmp_path / name, world, tracked=False) for name in ("done", "busy"))
    kept = rehearsal.rehearse_env(tmp_path / "kept", world, tracked=False, keep_ray_temp=True)
    (Path(done["RUNS_DIR"]) / "smoke").mkdir(parents=True)  # a run of bin/smoke's own RUN_NAME
    smoke = {**done, "RUN_NAME": "smoke"}
    dirs = {name: Path(rehearsal.ray_temp_dir(env)) for name, env in (("done", done), ("busy", busy), ("kept", kept),
                                                                     ("smoke", smoke))}
    worker = Path(f"{dirs['done']}-w")
    for path in (*dirs.values(), worker):
        (path / "session_latest").mkdir(parents=True)
    user = subprocess.Popen(["sh", "-c", "sleep 600", "sh", str(dirs["busy"] / "session_latest")])
    try:
        while str(dirs["busy"]) not in procfs.cmdline(user.pid, limit=1000):  # (argv readable once exec is done)
            assert user.poll() is None, user.returncode
        removed = rehearsal.remove_ray_temps()
    finally:
        user.kill()
        user.wait()
    try:
        assert sorted(removed) == sorted([str(dirs["done"]), str(worker), str(dirs["smoke"])]), removed
        assert not dirs["done"].exists() and not worker.exists() and not dirs["smoke"].exists()
        assert dirs["busy"].is_dir() and dirs["kept"].is_dir()
    finally:
        for path in dirs.values():
            subprocess.run(["rm", "-rf", str(path)], check=True)


def test_the_whole_session_removes_the_reference_s_ray_temp_dir_at_its_end(tmp_path):
    """The reference keeps its Ray temp dir while other workers read its Ray logs (keep_ray_temp):
    each `make test` left that one /tmp/ray-<hash> behind. The session's end (the controller, after
    every worker) removes it once no process uses it."""
    import json

    from support import reference, rehearsal

    env = rehearsal.rehearse_env(tmp_path / "ref", tmp_path / "world", tracked=False, keep_ray_temp=True)
    (tmp_path / "reference").mkdir()
    (tmp_path / "reference" / "result.json").write_text(json.dumps({"env": env}))
    temp, worker = Path(rehearsal.ray_temp_dir(env)), Path(rehearsal.ray_temp_dir(env) + "-w")
    try:
        for path in (temp, worker):
            (path / "session_latest").mkdir(parents=True)
        user = subprocess.Popen(["sh", "-c", "sleep 600", "sh", str(temp / "session_latest")])
        try:
            while str(temp) not in procfs.cmdline(user.pid, limit=1000):  # (argv readable once exec is done)
                assert user.poll() is None, user.returncode
            assert reference.remove_ray_temp(tmp_path) == [str(worker)]  # its head's dir is still in use
        finally:
            user.kill()
            user.wait()
        assert reference.remove_ray_temp(tmp_path) == [str(temp)] and not temp.exists() and not worker.exists()
        assert reference.remove_ray_temp(tmp_path / "no-reference-here") == []
    finally:
        for path in (temp, worker):
            subprocess.run(["rm", "-rf", str(path)], check=True)


def test_a_listener_probe_from_a_namespace_removed_before_the_call_says_so():
    """test_two_nodes calls each every-address listener from the other node's namespace. When that
    pair was reclaimed between the read of /proc/net/tcp and the call, the probe must say the
    namespace is gone (the listener went with it), not come back empty as if never called."""
    from support.netns import NAMESPACE_GONE, grpc_answers
    from support.twonode import need_root

    from pyhelpers.procs import netns

    need_root()
    name = f"ssr-gone-{os.getpid()}"
    assert not (netns.NETNS_DIR / name).exists()
    assert grpc_answers(name, "127.0.0.1", 1) == {"probe": NAMESPACE_GONE}
