"""A worker's node agent (pyhelpers/launch/node_agent.py) around `ray start --block`, with a `ray` that
fails the way Ray 2.60.0 does on a loaded worker.

ray/_private/node.py:424-444 (2.60.0) waits a fixed 30 s for the raylet it just started to register
with the head's GCS, then raises "The current node timed out during startup…"; `ray start` exits 1
before it prints "Ray runtime started." (ray/scripts/scripts.py:1249-1251), which it prints only once
that wait succeeded. Under load (a fresh-clone CI with four test workers on two cores) this ended a
worker's agent and left the head waiting out JOIN_TIMEOUT for a node that was never coming.

The stand-in `ray` below prints what the real one prints in each case and, in every start, leaves
running what a real start starts (stricter than the real one, whose atexit handler and kernel
fate-sharing usually end a failed start's raylet: node.py:630-635, 114-116): a raylet in the agent's
group, a dashboard agent that ignores TERM (a worker's ray::DashboardAgent and RuntimeEnvAgent did,
holding RAY_PORT+4..+7 against the next `make join`: issue 41 item 4), and a worker in a session of
its own. Whatever ends the agent, none of them may outlive it.

Issue 41 item 10 (after a loaded `make test-fast`, one process of the first test's `ray`, in a group of
its own with parent PID 1, still ran 1 h 43 min later): only a started `ray` blocks that long, so that
test's agent was never stopped, and had died since without ending its `ray`. The old test stopped
the agent only at its very end: a `_wait_for` past its 20 s deadline, or a read of the heartbeat file
while the agent rewrote it in place (an empty file: JSONDecodeError), failed the test and left the
agent running with nothing to stop it. The old agent ended a start's leftovers only between failed
attempts: an error inside it (such as its next heartbeat write once a later pytest session removed
the old tmp dir), a stop or `make leave` during a start, and a start that ended after Ray started
all left them running. Now a fixture ends whatever a test's agent left, the waits have no deadline
(the suite's timeout guards a hang), the heartbeat is written atomically, and every test asserts
that nothing of the agent's starts survives it, in each way it can end. The gate (FAKE_RAY_HOLD)
holds a start at the point where it has started its processes but not yet failed, the interleaving
no timing hits reliably.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import ROOT

from pyhelpers.procs import procfs

# Each test runs the agent as a process with stand-in `ray start` process trees and their stop grace
# (about 1 s each, 15 s for the module): service processes, so the full lane's.
pytestmark = pytest.mark.heavy

FAKE_RAY = textwrap.dedent("""\
    #!/usr/bin/env bash
    # `ray start --block` of Ray 2.60.0, one behaviour per attempt: FAKE_RAY_PLAN="fail start" means the
    # first attempt times out before the raylet registered, the second starts and blocks.
    # Each attempt first leaves running what a real start starts (each pid in $FAKE_RAY_DIR/spawned): its
    # raylet, in the agent's group; the raylet's dashboard agent, which ignores TERM as Ray's
    # DashboardAgent and RuntimeEnvAgent do; a worker in a session of its own, as Ray's workers run.
    # FAKE_RAY_HOLD="failing-1" holds attempt 1 at that point (after it started those, before it
    # fails): it writes at-failing-1 and waits for go-failing-1.
    set -u
    d="$FAKE_RAY_DIR"
    n=$(( $(cat "$d/count" 2>/dev/null || echo 0) + 1 ))
    echo "$n" > "$d/count.new" && mv "$d/count.new" "$d/count"
    read -r -a plan <<< "$FAKE_RAY_PLAN"
    what="${plan[$((n - 1))]:-start}"
    hold() {
      [[ " ${FAKE_RAY_HOLD:-} " == *" $1-$n "* ]] || return 0
      touch "$d/at-$1-$n"
      while [[ ! -e "$d/go-$1-$n" ]]; do sleep 0.02; done
    }
    echo "Local node IP: 198.51.100.2"
    sleep 3600 & echo "$! raylet $n" >> "$d/spawned"
    (trap '' TERM; exec sleep 3600) & echo "$! dashboard-agent $n" >> "$d/spawned"
    setsid sleep 3600 & echo "$! worker $n" >> "$d/spawned"
    case "$what" in
      fail)
        hold failing
        echo "Exception: The current node timed out during startup. This could happen because some of the raylet failed to startup or the GCS has become overloaded."
        exit 1 ;;
      start|die)
        echo "2026-12-05 19:57:00,854	SUCC scripts.py:1251 -- Ray runtime started."
        if [[ "$what" == die ]]; then echo "Some Ray subprocesses exited unexpectedly: raylet"; exit 1; fi
        trap 'exit 0' TERM
        while :; do sleep 0.1; done ;;
    esac
""")
LEFT = "sleep 3600"  # the command line of what each start leaves running

# The agent's supervision, in its own session as the ray-worker service runs it (its cleanup ends the
# other members of its process group: never the test's), with main()'s two ways to be asked to stop:
# the run's stop marker and TERM (make leave); the head's GCS answers while the file head-up exists, and
# head-epoch names the start of the head's Ray that runs (main(): its ray-head pidfile's version). Its heartbeat goes where main() writes node.json, into
# a directory of the run (here run/), atomically as there.
DRIVER = textwrap.dedent("""\
    import json, os, signal, sys
    from pathlib import Path
    from pyhelpers.jsonfiles import write_json_atomic
    from pyhelpers.launch import node_agent
    d = Path(sys.argv[1])
    beats, left = [], []
    signal.signal(signal.SIGTERM, lambda *_: left.append(1))
    def stop_reason():
        return "the run was stopped" if (d / "stop").exists() else "make leave" if left else None
    def beat(state):
        beats.append(state)
        write_json_atomic(d / "run" / "beat.json", state)
    ended = node_agent.supervise([str(d / "ray")], dict(os.environ), grace=0.5, pause=0.1,
                                 stop_reason=stop_reason, beat=beat, heartbeat=0.1,
                                 head_answers=lambda: (d / "head-up").exists(),
                                 rejoin_wait=float(os.environ.get("REJOIN_WAIT", "3600")))
    (d / "result.json").write_text(json.dumps({"rc": ended.code, "ray_exit": ended.ray_exit, "beats": beats}))
""")


@pytest.fixture
def agent(tmp_path):
    """start(plan, hold="") -> the agent's Popen. At the end, whatever the test saw: everything its
    `ray` starts left and the agent's group are killed, so that a failing test leaves nothing."""
    started = []

    def start(plan: str, hold: str = "", rejoin_wait: str = "3600", keeper: bool = False) -> subprocess.Popen:
        ray = tmp_path / "ray"
        ray.write_text(FAKE_RAY)
        ray.chmod(0o755)
        (tmp_path / "run").mkdir()
        env = {**os.environ, "FAKE_RAY_DIR": str(tmp_path), "FAKE_RAY_PLAN": plan, "FAKE_RAY_HOLD": hold, "REJOIN_WAIT": rejoin_wait,
               "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen([sys.executable, "-c", KEEPER if keeper else DRIVER, str(tmp_path)], env=env, cwd=ROOT, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        for pid in [int(p.split()[0]) for p in _survivors(tmp_path, proc.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()


def _spawned(tmp_path: Path, attempt: int | None = None) -> list[tuple[int, str]]:
    """(pid, what) of each process the stand-in's starts left running (of one attempt, or all)."""
    path = tmp_path / "spawned"
    rows = [line.split() for line in path.read_text().splitlines()] if path.is_file() else []
    return [(int(pid), what) for pid, what, n in rows if attempt is None or int(n) == attempt]


def _survivors(tmp_path: Path, agent_pgid: int, attempt: int | None = None) -> list[str]:
    """What the stand-in's starts left that still runs (the pid first), and the agent group's live members."""
    left = [f"{pid} ({what})" for pid, what in _spawned(tmp_path, attempt)
            if procfs.is_alive(pid) and procfs.cmdline(pid) == LEFT]
    if attempt is None:
        left += [f"{pid} (in the agent's group: {procfs.cmdline(pid)})" for pid in procfs.group_members(agent_pgid)]
    return left


def _wait_for(proc: subprocess.Popen, cond) -> None:
    """Until cond() holds while the agent runs (the test's timeout guards a hang: no deadline that a
    loaded machine can miss)."""
    while not cond():
        assert proc.poll() is None, f"the agent ended (exit {proc.returncode}): {proc.stdout.read()}"
        time.sleep(0.05)


def _beat(tmp_path: Path) -> dict:
    path = tmp_path / "run" / "beat.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def _finish(proc: subprocess.Popen) -> tuple[str, dict]:
    out, _ = proc.communicate()
    result = Path(proc.args[-1]) / "result.json"
    return out, json.loads(result.read_text()) if result.is_file() else {}


def test_a_ray_start_that_timed_out_before_registering_is_started_again_after_its_leftovers_end(tmp_path, agent):
    proc = agent("fail start")
    _wait_for(proc, lambda: _beat(tmp_path).get("ray_started") is not None)
    assert _beat(tmp_path)["attempt"] == 2
    # all the failed start left ended before the second start: its raylet, the raylet's agent that
    # ignores TERM, and a worker in a session of its own
    assert not _survivors(tmp_path, proc.pid, attempt=1), "the failed start's processes still run beside the second"
    (tmp_path / "stop").touch()
    out, result = _finish(proc)
    assert "timed out during startup" in out  # Ray's own words reach the agent's log
    assert "Ray runtime started." in out
    assert "did not register with the head (exit 1); starting it again: attempt 2 of 3" in out, out
    first = result["beats"][0]
    assert first["attempt"] == 1 and first["attempts"] == 3 and first["ray_started"] is None
    assert result["beats"][-1]["attempt"] == 2 and result["beats"][-1]["ray_started"] is not None
    assert result["rc"] == 0 and "stopping this worker's Ray node (the run was stopped)" in out
    assert not _survivors(tmp_path, proc.pid), out


def test_a_ray_node_that_ends_with_the_head_s_ray_joins_again_once_the_head_s_gcs_answers(tmp_path, agent):
    """Issue 41 item 1: the head's Ray lost mid-run (its GCS gone: head-up absent) and started again by
    the head's ray-lost restart, or the network to the head cut and back: the node joins the head on
    its own, with no hand on the worker, once its GCS answers; with a fresh count of attempts, once
    all the ended start left has ended."""
    proc = agent("die fail start")
    _wait_for(proc, lambda: _beat(tmp_path).get("rejoining") is not None)
    assert (tmp_path / "count").read_text().strip() == "1"  # no start while the head does not answer
    assert not _survivors(tmp_path, proc.pid, attempt=1), "the ended node's processes outlived it"
    (tmp_path / "head-up").touch()
    _wait_for(proc, lambda: _beat(tmp_path).get("ray_started") is not None)
    assert {k: _beat(tmp_path)[k] for k in ("attempt", "rejoins")} == {"attempt": 2, "rejoins": 1}
    (tmp_path / "stop").touch()
    out, result = _finish(proc)
    assert "this node's Ray ended (exit 1) and the head's GCS does not answer" in out, out
    assert "the head's GCS answers again: starting this node's Ray again" in out, out
    assert "starting it again: attempt 2 of 3" in out, out  # the rejoin's own count of attempts
    assert result["rc"] == 0 and not _survivors(tmp_path, proc.pid), out


def test_a_node_lost_on_its_own_while_the_head_s_gcs_answers_joins_again_with_no_hand_on_it(tmp_path, agent):
    """Issue 41: its raylet killed or crashed while the head's Ray runs on: the head's node-lost
    restart waits JOIN_TIMEOUT for the node, and the agent starts it again on its own (it used to
    end, leaving `make join` to a person at 3 a.m.)."""
    (tmp_path / "head-up").touch()
    proc = agent("die start")
    _wait_for(proc, lambda: _beat(tmp_path).get("rejoins") == 1 and _beat(tmp_path).get("ray_started") is not None)
    assert not _survivors(tmp_path, proc.pid, attempt=1), "the lost node's processes outlived it"
    (tmp_path / "stop").touch()
    out, result = _finish(proc)
    assert (tmp_path / "count").read_text().strip() == "2"
    assert "this node's Ray ended (exit 1) while the head's GCS answers (its raylet killed or crashed): " \
           "joining the head again" in out, out
    assert result["rc"] == 0 and not _survivors(tmp_path, proc.pid), out
    # said in the heartbeat of the start that ended (the head asks before it picks its restart:
    # loop/node_verdict.py), and only there: the next start's beats have none
    ended = [(b["attempt"], b["rejoins"]) for b in result["beats"] if b.get("ray_ended") is not None]
    assert ended and set(ended) == {(1, 0)}, result["beats"]


def test_a_node_whose_head_does_not_come_back_within_join_timeout_leaves(tmp_path, agent):
    # the run finished or failed on the head (its Ray stopped for good): the agent ends as it used
    # to, after the wait, with nothing of its node left
    proc = agent("die", rejoin_wait="0.5")
    out, result = _finish(proc)
    assert (tmp_path / "count").read_text().strip() == "1"
    assert result["rc"] == 1 and "did not answer within 0.5 s (JOIN_TIMEOUT): this node leaves" in out, out
    assert not _survivors(tmp_path, proc.pid), out


def test_a_ray_start_failing_every_attempt_gives_up_naming_the_attempts(tmp_path, agent):
    proc = agent("fail fail fail start")
    out, result = _finish(proc)
    assert (tmp_path / "count").read_text().strip() == "3"
    assert result["rc"] == 1
    assert "did not register with the head in 3 attempts" in out, out
    # the agent gives up and ends: what its starts left must not outlive it, holding the node's
    # ports against the next `make join`
    assert not _survivors(tmp_path, proc.pid), f"a failed start's processes outlived the agent:\n{out}"


def _stop(tmp_path: Path, proc: subprocess.Popen) -> None:
    (tmp_path / "stop").touch()


def _leave(tmp_path: Path, proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)  # what the agent gets from `make leave`


def _lose_the_run_dir(tmp_path: Path, proc: subprocess.Popen) -> None:
    # its next heartbeat fails (as on a shared run dir that went away): an error inside the agent
    shutil.rmtree(tmp_path / "run")
    (tmp_path / "run").write_text("")


@pytest.mark.parametrize("plan, hold, end", [
    pytest.param("fail", "failing-1", _stop, id="run-stopped-while-a-start-fails"),
    pytest.param("fail", "failing-1", _leave, id="make-leave-while-a-start-fails"),
    pytest.param("start", "", _stop, id="run-stopped-after-ray-started"),
    pytest.param("start", "", _leave, id="make-leave-after-ray-started"),
    pytest.param("start", "", _lose_the_run_dir, id="an-error-in-the-agent"),
    pytest.param("die", "", _stop, id="run-stopped-while-waiting-to-rejoin"),
    pytest.param("die", "", _leave, id="make-leave-while-waiting-to-rejoin"),
])
def test_nothing_a_ray_start_left_outlives_the_agent_whatever_ends_it(tmp_path, agent, plan, hold, end):
    """Every way the agent ends, at each point of a start (a failing start held at its gate, a started
    one): its `ray start`, the raylet, the raylet's TERM-ignoring agents and a worker that made itself a
    session of its own all end with it (TERM, the grace, then KILL), whatever group they are in."""
    proc = agent(plan, hold)
    if hold:
        _wait_for(proc, lambda: (tmp_path / f"at-{hold}").exists())
    elif plan == "die":
        _wait_for(proc, lambda: _beat(tmp_path).get("rejoining") is not None)
    else:
        _wait_for(proc, lambda: _beat(tmp_path).get("ray_started") is not None)
    end(tmp_path, proc)
    out, _ = _finish(proc)
    assert len(_spawned(tmp_path)) == 3, out
    assert not _survivors(tmp_path, proc.pid), f"outlived the agent (exit {proc.returncode}):\n{out}"


# The ray-worker service as `make join` starts it: the keeper (launch/node_keeper.py) around the agent
# (DRIVER above), in the service's own session; the agent's pid in agent-<n>.pid at each start.
KEEPER = textwrap.dedent("""\
    import os, sys
    from pathlib import Path
    from pyhelpers.launch import node_keeper
    d = Path(sys.argv[1])
    agent = [sys.executable, "-c", "import os, sys; from pathlib import Path; "
             "d = Path(sys.argv[1]); n = os.environ['SHOPSIMRL_AGENT_RESTARTS']; "
             "(d / f'agent-{n}.pid').write_text(str(os.getpid())); "
             "exec(open(d / 'driver.py').read())", str(d)]
    sys.exit(node_keeper.keep(agent, dict(os.environ), grace=0.5,
                              stop_reason=lambda: "the run was stopped" if (d / "stop").exists() else None))
""")


def test_a_killed_node_agent_is_started_again_by_its_keeper_once_all_it_left_has_ended(tmp_path, agent):
    """Issue 41 (a worker's node agent SIGKILLed, as the OOM killer or a stray `kill -9` would): its
    `ray start --block` and raylet ran on unwatched (no stop marker read, no heartbeat, no rejoin after
    the next lost head). The service's own process, the keeper, ends what the killed agent left (its
    Ray node: the head's node-lost restart waits for the worker) and starts the agent again, which
    joins the head on its own; the run's stop then ends both, leaving nothing. The agent's own rejoin
    first (its Ray node ended once): its cleanup ends the rest of its group, which the keeper is in,
    and must not end the keeper."""
    (tmp_path / "head-up").touch()
    (tmp_path / "driver.py").write_text(DRIVER)
    proc = agent("die start start", keeper=True)
    _wait_for(proc, lambda: (tmp_path / "agent-0.pid").is_file() and _beat(tmp_path).get("rejoins") == 1
              and _beat(tmp_path).get("ray_started"))
    os.kill(int((tmp_path / "agent-0.pid").read_text()), signal.SIGKILL)
    _wait_for(proc, lambda: (tmp_path / "agent-1.pid").is_file() and (tmp_path / "count").read_text().strip() == "3"
              and _beat(tmp_path).get("ray_started"))
    assert not _survivors(tmp_path, proc.pid, attempt=2), "the killed agent's Ray node ran on beside the new one"
    (tmp_path / "stop").touch()
    out, _ = proc.communicate()
    assert proc.returncode == 0, out
    assert "the node agent was killed (signal 9): ending what it left, then starting it again (1 of 3)" in out, out
    assert not _survivors(tmp_path, proc.pid), out
