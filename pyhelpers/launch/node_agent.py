"""A worker's Ray node, supervised (make join, docs/multinode.md §5): `python -m pyhelpers.launch.node_agent`.

Started by `pyhelpers node join` as the ray-worker service (own process group, pidfile and log under
runs/<RUN>/nodes/<NODE_ADDR>/), it runs `ray start --block` (launch/ray_start.ray_worker) in its group,
copies its output into its log, and watches two things every half second while it runs:
- the run's stop marker (runs/<RUN>/stopped, in the shared run dir): `make stop` on the head writes it,
  and the head cannot signal another machine's processes, so the worker stops its own Ray; the head's
  leave marker for this node (nodes/<NODE_ADDR>/leave.json: a node the head found wrong, removed)
  the same way (stop_watch);
- its own heartbeat, runs/<RUN>/nodes/<NODE_ADDR>/node.json (rewritten every few seconds, with the
  start attempt and whether Ray said it started), which `make status` on any node reads.
A start that ends before Ray printed "Ray runtime started." is started again, up to START_ATTEMPTS in
all: Ray waits a fixed 30 s for a new raylet to register with the head's GCS
(ray/_private/node.py:424-444, 2.60.0) and a busy node can miss that, even though the GCS call
behind it waits RAY_START_TIMEOUT (ray_start.ray_start_env). A node that had started and
then ends, whatever ended it, joins again on its own, with no hand on the worker (issue 41): its
raylet killed or crashed while the head's GCS answers (the head's node-lost restart waits
JOIN_TIMEOUT for it); the head's Ray lost (started again by the head's ray-lost restart, which waits
for it and checks its storage again) or the network to the head cut, where the agent waits up to
JOIN_TIMEOUT for the head's GCS port to answer. Each rejoin starts Ray again with a fresh
START_ATTEMPTS, after RETRY_PAUSE_S. A head that does not answer in that time (its run finished or
failed) ends the agent. The agent also ends when the run is stopped, or
on TERM (`make leave`). Whichever way a start ends, all it started ends with it before the agent goes
on or exits (supervise: its group and its descendants, TERM, STOP_GRACE, KILL).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pyhelpers.config.load import load
from pyhelpers.jsonfiles import load_json_or_none, write_json_atomic
from pyhelpers.launch import cluster, node_env
from pyhelpers.procs import family, procfs, ready
from pyhelpers.run.layout import RunLayout, from_config

HEARTBEAT = 2.0
START_ATTEMPTS = 3  # three misses of Ray's 30 s registration wait in a row: not load, something to read
RETRY_PAUSE_S = 5.0
# ray/scripts/scripts.py:1249-1251 (2.60.0): printed once Node() returned, i.e. the raylet registered
STARTED = b"Ray runtime started."
# set by the keeper that starts this agent (node_keeper.py): how many times it started it again
# (node.json's agent_restarts, make status), and the stop markers' versions at the keeper's start
# (stop_watch), so an agent started again still reads a stop written while its predecessor was dead
RESTARTS_ENV = "SHOPSIMRL_AGENT_RESTARTS"
MARKERS_ENV = "SHOPSIMRL_NODE_MARKERS"


@dataclass(frozen=True)
class Ended:
    code: int  # the agent's exit status: 0 when stopped or Ray ended cleanly
    ray_exit: int  # the last `ray start`'s


def _copy(stream: IO[bytes], state: dict) -> None:
    """`ray start`'s output into the agent's log, noting when Ray says the node started."""
    for line in iter(stream.readline, b""):
        if STARTED in line and state["ray_started"] is None:
            state["ray_started"] = time.time()
        sys.stdout.buffer.write(line)
        sys.stdout.flush()


def _run_once(child: subprocess.Popen, state: dict, *, stop_reason: Callable[[], str | None],
              beat: Callable[[dict], None], heartbeat: float) -> str | None:
    """Until `child` ends (None) or a stop is asked for (its reason; the caller ends the child)."""
    last = 0.0
    while child.poll() is None:
        now = time.monotonic()
        if now - last >= heartbeat:
            beat(dict(state))
            last = now
        reason = stop_reason()
        if reason:
            print(f"stopping this worker's Ray node ({reason})", flush=True)
            return reason
        time.sleep(min(0.5, heartbeat))
    # said at once, before its leftovers are stopped (STOP_GRACE): the head asks whether the job's start
    # of this node's Ray outlived the job's failure before it picks the restart (loop/node_verdict.py)
    state["ray_ended"] = time.time()
    beat(dict(state))
    return None


def supervise(argv: list[str], env: dict[str, str], *, grace: float, stop_reason: Callable[[], str | None],
              beat: Callable[[dict], None], head_answers: Callable[[], bool], rejoin_wait: float,
              attempts: int = START_ATTEMPTS, pause: float = RETRY_PAUSE_S, heartbeat: float = HEARTBEAT) -> Ended:
    """Run `argv` (`ray start --block`) until it is stopped, starting it again when it ends before Ray
    said it started (at most `attempts` in a row), and when it ends after it had started, whatever
    ended it: once the head's GCS answers (`head_answers`; waited for up to `rejoin_wait` s) and
    `pause` s passed. A rejoin's count of attempts starts afresh.
    `beat(state)` is called every `heartbeat` s with the attempt, the number of attempts, when Ray
    said it started (None until then) and the rejoins.

    However an attempt ends (it failed, it ended after it started, a stop, an error in here), it and
    everything it started end with it before anything else happens: its raylet holds the node's
    ports against the next start or `make join`, Ray's dashboard and runtime-env agents ignore TERM,
    Ray's workers run in groups of their own. This process is made their subreaper, so that even a
    process whose parent died and that made itself a new session is still found as a descendant."""
    family.become_subreaper()
    reason, rc, rejoins, attempt = None, 0, 0, 0
    while attempt < attempts:
        attempt += 1
        state = {"attempt": attempt, "attempts": attempts, "ray_started": None, "rejoins": rejoins}
        child = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        copier = threading.Thread(target=_copy, args=(child.stdout, state), daemon=True)
        copier.start()
        try:
            reason = _run_once(child, state, stop_reason=stop_reason, beat=beat, heartbeat=heartbeat)
        finally:
            ended = family.stop_rest_of_my_family(grace, f"started by `ray start` (attempt {attempt})")
            rc = child.wait()
            family.reap_adopted()
        copier.join(timeout=2)  # its last lines first (nothing holds its pipe open any more)
        for r in ended:
            print(r.message, flush=True)
        beat(dict(state))
        if reason:
            break
        if state["ray_started"] is not None:
            if head_answers():
                print(f"this node's Ray ended (exit {rc}) while the head's GCS answers (its raylet killed or "
                      f"crashed): joining the head again in {pause:g} s (the head's node-lost restart waits "
                      "for it)", flush=True)
            else:
                reason = _wait_for_the_head(rc, state, stop_reason=stop_reason, beat=beat, head_answers=head_answers,
                                            every=min(0.5, heartbeat), wait=rejoin_wait)
                if reason or not head_answers():
                    break
            if reason := _pause(pause, stop_reason):
                break
            rejoins, attempt = rejoins + 1, 0
            continue
        if attempt == attempts:
            print(f"this node's Ray did not register with the head in {attempts} attempts (last exit {rc}): "
                  "the lines above say why; `make join` starts it again", flush=True)
            break
        print(f"this node's Ray did not register with the head (exit {rc}); starting it again: attempt "
              f"{attempt + 1} of {attempts} (Ray waits a fixed 30 s for a new raylet to register; a busy node "
              "can miss that)", flush=True)
        if reason := _pause(pause, stop_reason):
            break
    code = 0 if reason or rc in (0, -signal.SIGTERM) else 1
    return Ended(code, rc)


def _pause(pause: float, stop_reason: Callable[[], str | None]) -> str | None:
    """Wait `pause` s, or less when a stop is asked for meanwhile (its reason)."""
    end = time.monotonic() + pause
    while time.monotonic() < end:
        if reason := stop_reason():
            return reason
        time.sleep(min(0.1, pause))
    return stop_reason()


def _wait_for_the_head(rc: int, state: dict, *, stop_reason: Callable[[], str | None],
                       beat: Callable[[dict], None], head_answers: Callable[[], bool], every: float,
                       wait: float) -> str | None:
    """After a started node ended and the head's GCS does not answer: until it answers (None: join
    again), a stop is asked for (its reason) or `wait` s passed (None; the head did not come back).
    The heartbeat goes on, saying the node waits to rejoin."""
    print(f"this node's Ray ended (exit {rc}) and the head's GCS does not answer (the head's Ray lost, or the "
          f"network to the head cut): joining the head again once it answers (up to {wait:g} s, JOIN_TIMEOUT)",
          flush=True)
    state = {**state, "ray_started": None, "rejoining": time.time()}
    end = time.monotonic() + wait
    while not (reason := stop_reason()):
        beat(dict(state))
        if head_answers():
            print("the head's GCS answers again: starting this node's Ray again", flush=True)
            return None
        if time.monotonic() >= end:
            print(f"the head's GCS did not answer within {wait:g} s (JOIN_TIMEOUT): this node leaves; `make join` "
                  "starts it again", flush=True)
            return None
        time.sleep(every)
    return reason


def _version(path: Path) -> list | None:
    """What tells one write of a file from the next (os.replace makes a new inode), or None when absent."""
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_ino, st.st_mtime_ns, st.st_size]


def _markers(lay: RunLayout, addr: str) -> dict[Path, Callable[[], str]]:
    """The files whose new version stops this node, each with its reason: the run's stop marker
    (`make stop` on the head) and the head's leave marker for this node (cluster.remove_node)."""
    leave = cluster.leave_marker(lay, addr)
    return {lay.stopped_marker: lambda: "the run was stopped",
            leave: lambda: "the head removed this node: " + str((load_json_or_none(leave) or {}).get("reason"))}


def marker_versions(lay: RunLayout, addr: str) -> dict[str, list | None]:
    """The stop markers' versions now (JSON: node_keeper passes them to each agent it starts)."""
    return {str(path): _version(path) for path in _markers(lay, addr)}


def stop_watch(lay: RunLayout, addr: str, left: list | None = None,
               before: dict[str, list | None] | None = None) -> Callable[[], str | None]:
    """Why this worker's Ray node must stop now, or None: the run's stop marker (`make stop` on the
    head) or the head's leave marker for this node (cluster.remove_node) written since `before`
    (marker_versions; by default, this call), or a TERM (`make leave`: `left` not empty). A marker is
    compared with what it was then, never by its time: that is the clock of the machine that wrote
    it, which need not agree with this one. `before` is the keeper's (node_keeper.py): a stop written
    while a killed agent was being replaced still stops the new one."""
    markers = _markers(lay, addr)
    before = before if before is not None else marker_versions(lay, addr)

    def reason() -> str | None:
        for path, why in markers.items():
            now = _version(path)
            if now is not None and now != before.get(str(path)):
                return why()
        return "make leave" if left else None
    return reason


def main() -> int:
    cfg = load()
    lay = from_config(cfg)
    mine = cluster.node_dir(lay, cfg.NODE_ADDR)
    left: list = []
    from_keeper = os.environ.get(MARKERS_ENV)
    stop_reason = stop_watch(lay, cfg.NODE_ADDR, left, before=json.loads(from_keeper) if from_keeper else None)
    started = time.time()
    dropped = {"RAY_AUTH_TOKEN", *node_env.dropped(cfg)}  # a shell's token would replace the run's; proxies
    env = {**{k: v for k, v in os.environ.items() if k not in dropped}, **cluster.worker_env(cfg, lay)}

    def on_term(signum, frame):
        left.append(signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    # host: `make status` compares the heartbeat with its own clock only on this machine
    info = {"addr": cfg.NODE_ADDR, "iface": cfg.NET_IFACE, "gpus": cfg.NUM_GPUS, "host": procfs.hostname(),
            "head": cfg.HEAD_ADDR, "pid": os.getpid(), "started": started,
            "agent_restarts": int(os.environ.get(RESTARTS_ENV, "0"))}
    last: dict = {}

    def beat(state: dict) -> None:
        last.update(state)
        write_json_atomic(mine / "node.json", {**info, **state, "heartbeat": time.time()})

    ended = supervise(cluster.worker_argv(cfg), env, grace=cfg.STOP_GRACE, stop_reason=stop_reason, beat=beat,
                      head_answers=lambda: ready.tcp_probe(cfg.HEAD_ADDR, cfg.RAY_PORT)()[0],
                      rejoin_wait=cfg.JOIN_TIMEOUT)
    write_json_atomic(mine / "node.json", {**info, **last, "heartbeat": time.time(), "ended": time.time(),
                                           "exit": ended.ray_exit})
    print(f"the Ray worker node ended (exit {ended.ray_exit})", flush=True)
    return ended.code


if __name__ == "__main__":
    sys.exit(main())
