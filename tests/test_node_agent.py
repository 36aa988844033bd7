"""A worker's node agent (pyhelpers/launch/node_agent.py) around `ray start --block`, with a `ray` that
fails the way Ray 2.60.0 does on a loaded worker.

ray/_private/node.py:424-444 (2.60.0) waits a fixed 30 s for the raylet it just started to register
with the head's GCS, then raises "The current node timed out during startup…"; `ray start` exits 1
before it prints "Ray runtime started." (ray/scripts/scripts.py:1249-1251), which it prints only once
that wait succeeded. Under load (a fresh-clone CI with four test workers on two cores) this ended a
worker's agent and left the head waiting out JOIN_TIMEOUT for a node that was never coming.

The stand-in `ray` below prints what the real one prints in each case and, in the failed start,
leaves a process of its own in the agent's group (stricter than the real one, whose atexit handler
and kernel fate-sharing usually end its raylet: node.py:630-635, 114-116); a second `ray start`
on the same ports would find that process in its way.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from conftest import ROOT

from pyhelpers.procs import procfs

FAKE_RAY = textwrap.dedent("""\
    #!/usr/bin/env bash
    # `ray start --block` of Ray 2.60.0, one behaviour per attempt: FAKE_RAY_PLAN="fail start" means the
    # first attempt times out before the raylet registered, the second starts and blocks
    set -u
    n=$(( $(cat "$FAKE_RAY_DIR/count" 2>/dev/null || echo 0) + 1 ))
    echo "$n" > "$FAKE_RAY_DIR/count"
    read -r -a plan <<< "$FAKE_RAY_PLAN"
    what="${plan[$((n - 1))]:-start}"
    echo "Local node IP: 198.51.100.2"
    case "$what" in
      fail)
        sleep 300 &   # its raylet, still running when `ray start` gives up
        echo $! > "$FAKE_RAY_DIR/leftover-$n"
        echo "Exception: The current node timed out during startup. This could happen because some of the raylet failed to startup or the GCS has become overloaded."
        exit 1 ;;
      start|die)
        echo "2026-12-05 19:57:00,854	SUCC scripts.py:1251 -- Ray runtime started."
        if [[ "$what" == die ]]; then sleep 0.5; echo "Some Ray subprocesses exited unexpectedly: raylet"; exit 1; fi
        trap 'exit 0' TERM
        while :; do sleep 0.1; done ;;
    esac
""")

# The agent's supervision, in its own session as the ray-worker service runs it (its cleanup of a
# failed start ends the other members of its process group: never the test's).
DRIVER = textwrap.dedent("""\
    import json, sys
    from pathlib import Path
    from pyhelpers.launch import node_agent
    d = Path(sys.argv[1])
    beats = []
    def stop_reason():
        return "the run was stopped" if (d / "stop").exists() else None
    def beat(state):
        beats.append(state)
        (d / "beat.json").write_text(json.dumps(state))
    ended = node_agent.supervise([str(d / "ray")], dict(__import__("os").environ), grace=1.0, pause=0.1,
                              stop_reason=stop_reason, beat=beat, heartbeat=0.1)
    (d / "result.json").write_text(json.dumps({"rc": ended.code, "ray_exit": ended.ray_exit, "beats": beats}))
""")


def _agent(tmp_path: Path, plan: str) -> subprocess.Popen:
    ray = tmp_path / "ray"
    ray.write_text(FAKE_RAY)
    ray.chmod(0o755)
    env = {**os.environ, "FAKE_RAY_DIR": str(tmp_path), "FAKE_RAY_PLAN": plan, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path)], env=env, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)


def _wait_for(proc: subprocess.Popen, cond, timeout: float = 300.0) -> None:  # (a bound on a hang)
    end = time.monotonic() + timeout
    while not cond():
        assert proc.poll() is None, f"the agent ended (exit {proc.returncode}): {proc.stdout.read()}"
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def _finish(proc: subprocess.Popen) -> tuple[str, dict]:
    try:
        out, _ = proc.communicate(timeout=300)  # a bound on a hang: a loaded machine is slow
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return out, json.loads((Path(proc.args[-1]) / "result.json").read_text())


def test_a_ray_start_that_timed_out_before_registering_is_started_again_after_its_leftovers_end(tmp_path):
    proc = _agent(tmp_path, "fail start")
    _wait_for(proc, lambda: (tmp_path / "count").is_file() and (tmp_path / "count").read_text().strip() == "2")
    _wait_for(proc, lambda: json.loads((tmp_path / "beat.json").read_text()).get("ray_started") is not None)
    leftover = int((tmp_path / "leftover-1").read_text())
    assert leftover not in procfs.group_members(proc.pid), "the failed start's raylet still runs beside the second start"
    (tmp_path / "stop").touch()
    out, result = _finish(proc)
    assert "timed out during startup" in out  # Ray's own words reach the agent's log
    assert "Ray runtime started." in out
    assert "did not register with the head (exit 1); starting it again: attempt 2 of 3" in out, out
    first = result["beats"][0]
    assert first["attempt"] == 1 and first["attempts"] == 3 and first["ray_started"] is None
    assert result["beats"][-1]["attempt"] == 2 and result["beats"][-1]["ray_started"] is not None
    assert result["rc"] == 0 and "stopping this worker's Ray node (the run was stopped)" in out


def test_a_ray_node_that_ends_after_it_started_is_not_started_again(tmp_path):
    # a node lost mid-run (its raylet killed, the head gone): the head's node-lost restart and the
    # user's `make join` decide, not the agent
    proc = _agent(tmp_path, "die")
    out, result = _finish(proc)
    assert (tmp_path / "count").read_text().strip() == "1"
    assert result["rc"] == 1 and "starting it again" not in out


def test_a_ray_start_failing_every_attempt_gives_up_naming_the_attempts(tmp_path):
    proc = _agent(tmp_path, "fail fail fail start")
    out, result = _finish(proc)
    assert (tmp_path / "count").read_text().strip() == "3"
    assert result["rc"] == 1
    assert "did not register with the head in 3 attempts" in out, out
    # the agent gives up and ends: what its last start left must not outlive it, holding the node's
    # ports against the next `make join`
    leftovers = [int((tmp_path / f"leftover-{n}").read_text()) for n in (1, 2, 3)]
    assert not [pid for pid in leftovers if procfs.is_alive(pid)], "a failed start's raylet outlived the agent"
