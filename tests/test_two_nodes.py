"""A run on two nodes of one host (docs/multinode.md): two network namespaces joined by a veth pair
(pyhelpers/procs/netns.py), a real two-node Ray cluster with token auth. Needs root and iproute2, as
CI has. One module-scoped set-up keeps the cost to one rehearsal (a head's Ray alone that workers try
to join is tests/test_two_node_joins.py's, a module of its own so that another xdist worker runs it
beside this one):

- `two_node_rehearsal`: first a `make rehearse NNODES=2` SIGKILLed once its head started Ray, then
  `make stop REHEARSAL=1`, which must leave nothing of it (issue 41 item 3); then `make rehearse
  NNODES=2` to its end (round 0's RolloutManager, with the rollout plugin in it, pinned to the worker,
  round 1's to the head; a proxy in the shell), its listeners in both namespaces read from
  /proc/net/tcp{,6} every second while it runs (and each every-address listener called without the
  token), `make status REHEARSAL=1` taken once the worker joined and the job was submitted; then, in
  round 1, the worker's raylet killed (a node lost mid-round: issue 28 item 8) while the worker holds
  only training ranks (issue 41 item 7: the stand-in holds them on every node for the whole job, as
  slime does), its node agent starting its Ray again on its own (no `make join` by hand); before
  that, while the job holds after round 0's first step, the driver's process group SIGKILLed and
  `make rehearse NNODES=2 RESUME=1` (driver-lost, the killed run's pair reclaimed), and while the
  resumed job holds after round 0's last step, the worker's node agent SIGKILLed (its keeper ends the
  agent's Ray node and starts the agent again: node-lost), and as round 0 is played again the worker
  cut off for at least 60 s (its link down in its namespace: node-lost); then, the
  job held after round 1's last step (FAKE_SLIME_HOLD_AT), the head's gcs_server SIGKILLed (issue 41
  item 1: `ray-lost`, the head's Ray started again, the worker's agent joining the new head on its
  own) and the job released once the restart is recorded; `make status` taken again at the end. The
  run must still end exactly as the one-node reference rehearsal does (the stand-ins are
  deterministic, and neither where an episode is played nor a resume may change it);
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import ROOT
from support.netns import NAMESPACE_GONE, Listener, grpc_answers, listeners
from support.rehearsal import (
    Run,
    in_rehearsal,
    outcome,
    pyhelpers_cmd,
    rehearse,
    rehearse_env,
    rows,
    start,
    stop_leftovers,
    wait_for,
)
from support.twonode import (
    HEAD,
    PROXIES,
    WORKER,
    inside,
    left_of,
    need_root,
    ranks_of,
    ray_process,
    slime_log,
    two_node_outcome,
    wandb_actor_num_nodes,
)

from pyhelpers.jsonfiles import load_json_or_none
from pyhelpers.procs import netns, procfs

pytestmark = pytest.mark.heavy  # two Ray nodes (a killed rehearsal, then a whole one)

# The rollouts after whose training the job holds for a fault (FAKE_SLIME_HOLD_AT; the worker's cut and
# its raylet's kill come while the job trains, at a step's end): round 0's first
# step for the driver's process group to be SIGKILLed (then `make rehearse NNODES=2 RESUME=1`); round
# 0's last, before its save, for the worker's node agent to be SIGKILLed; round 1's last step for the
# head's gcs_server, once the worker lost earlier in that round has rejoined.
DRIVER_KILLED_AFTER, AGENT_KILLED_AFTER, GCS_KILLED_AFTER = 0, 1, 3
# How long the worker is cut off at least (issue 41's 60 s partition): past the 60 s a worker's raylet
# keeps trying to reach its GCS (Ray's gcs_rpc_server_reconnect_timeout_s, 60 in
# src/ray/common/ray_config_def.h), so it ends on its own and its agent waits for the head to answer.
CUT_S = 60
# A fault that never heals holds its job forever (nothing but the test releases it): past this long
# with no step of the story, the test gives up, records why and lets every held job go. Far above
# any step's time at a load of 20 (each took under 2 min): it only turns a hang into a failure.
FAULT_GUARD_S = 900
# GPUs a node: 2 (4 in all, as the one-node reference has). Each GPU is a rank actor and an InfoActor,
# each a Ray worker process started again with every job (seven in the story): at 4 a node the story's
# job starts cost about 100 CPU-seconds more of a 2-core machine, for no path that 2 a node skips
# (ranks still span both nodes, the head's first, and the outcome is the reference's).
GPUS_PER_NODE = 2


@pytest.fixture(scope="module")
def two_node_rehearsal(tmp_path_factory, rehearsal_world):
    need_root()
    tmp = tmp_path_factory.mktemp("two-node")
    gate = tmp / "hold"
    # (untracked: conftest stops a tracked rehearsal after each test; this one serves the module)
    # round 0's RolloutManager (the plugin) on the worker, round 1's on the head (the lost worker then
    # holds only training ranks), a proxy in the user's shell the job must not see, steps slow
    # enough for the worker's raylet to be killed inside round 1, and the job held after the steps
    # where a fault is played
    holds = ",".join(str(i) for i in (DRIVER_KILLED_AFTER, AGENT_KILLED_AFTER, GCS_KILLED_AFTER))
    env = rehearse_env(tmp, rehearsal_world, tracked=False, NNODES=2, NUM_GPUS=GPUS_PER_NODE, JOIN_TIMEOUT=300,
                       FAKE_SLIME_ROLLOUT_NODE="worker-then-head", FAKE_SLIME_STEP_DELAY=2, RESTART_BACKOFF=0.5,
                       FAKE_SLIME_HOLD_AT=holds, FAKE_SLIME_HOLD_GATE=str(gate), **PROXIES)
    record = Path(env["RUNS_DIR"]) / ".rehearsal" / "twonode.json"
    run = Run(Path(env["RUNS_DIR"]))
    # first, issue 41 item 3: a `make rehearse NNODES=2` killed, then `make stop REHEARSAL=1`
    killed = _kill_a_rehearsal_then_make_stop(env, run, record)
    proc, log = start(env)
    # the driver now: the first rehearsal's, then (once that is SIGKILLed) its `RESUME=1`'s
    current = {"proc": proc, "logs": [log], "switching": False}
    seen: set[Listener] = set()
    owners: dict[str, str] = {}  # socket inode -> its holder's command line, found once
    refused: dict[tuple[str, int], dict[str, str]] = {}
    roles: dict[str, str] = {}  # namespace -> head or worker, of every pair the run had
    # what the run went through, in order: the cluster whole (status); the driver's process group
    # SIGKILLed while the job holds after round 0's first step, and `RESUME=1`; the worker's node agent
    # SIGKILLed while the resumed job holds after round 0's last step, its keeper ending the agent's
    # Ray node and starting it again, the node-lost restart; the worker's raylet killed in round 1, the
    # node-lost restart, the worker's agent starting its Ray again on its own (no `make join` by hand);
    # then the head's GCS killed while the job holds, the restart for it, the agent's second rejoin
    story: dict = {"errors": []}
    metrics = run.round_dir(1) / "rollout_metrics.jsonl"
    round0 = run.round_dir(0) / "rollout_metrics.jsonl"

    def node_json(pair: dict) -> dict:  # the worker agent's heartbeat
        return load_json_or_none(run.run_dir / "nodes" / pair["worker"]["addr"] / "node.json") or {}

    def held(step: int) -> Path:
        return Path(f"{gate}-{step}")

    def kill_the_driver_and_resume(pair: dict) -> None:
        # a closed terminal or a killed session while round 0 trains; then `make rehearse NNODES=2
        # RESUME=1`, which reclaims the old pair (and the held job in it) and goes on; the gate is opened
        # once the resumed run submitted its job, so no job holds there again
        if "driver_killed" not in story:
            if Path(f"{held(DRIVER_KILLED_AFTER)}.held").is_file():
                story["old_pair"] = pair
                story["jobs_before_resume"] = len(run.events("job-submitted"))
                current["switching"] = True
                os.killpg(current["proc"].pid, signal.SIGKILL)
                current["proc"].wait()
                new, new_log = start(env, "--resume")
                current.update(proc=new, switching=False)
                current["logs"].append(new_log)
                story["driver_killed"] = True
        elif "driver_resumed" not in story:
            if len(run.events("job-submitted")) > story["jobs_before_resume"]:
                held(DRIVER_KILLED_AFTER).write_text("released\n")
                story["driver_resumed"] = True

    def kill_the_worker_s_agent(pair: dict) -> None:
        # the resumed job holds after round 0's last step, before its save: the worker's node agent
        # SIGKILLed (the OOM killer); its keeper ends what the agent left (the worker's Ray node) and
        # starts it again. Released once the killed agent's Ray node is gone (the new agent's heartbeat),
        # so the held job's save meets a dead rank, as slime's would, and the job fails node-lost.
        if "agent_killed" not in story:
            beat = node_json(pair)
            if Path(f"{held(AGENT_KILLED_AFTER)}.held").is_file() and beat.get("pid") and beat.get("ray_started"):
                assert "pyhelpers.launch.node_agent" in procfs.cmdline(beat["pid"]), procfs.cmdline(beat["pid"])
                story["restarts_before_agent"] = len(run.restarts())
                os.kill(beat["pid"], signal.SIGKILL)
                story["agent_killed"] = beat["pid"]
        elif "agent_replaced" not in story:
            beat = node_json(pair)
            if beat.get("agent_restarts") == 1 and beat.get("pid") != story["agent_killed"]:
                held(AGENT_KILLED_AFTER).write_text("released\n")
                story["agent_replaced"] = beat
        elif "agent_restart" not in story:
            if len(run.restarts()) > story["restarts_before_agent"]:
                story["agent_restart"] = run.restarts()[story["restarts_before_agent"]]
                # round 0's steps so far: the cut comes once its replay wrote one more
                story["round0_lines"] = len(round0.read_text().splitlines())
        elif "agent_status" not in story:
            beat = node_json(pair)
            if beat.get("agent_restarts") == 1 and beat.get("ray_started") and (run.run_dir / "nodes.json").is_file():
                story["agent_status"] = in_rehearsal(env, *pyhelpers_cmd("run", "status")).stdout

    def cut_the_worker_off(pair: dict) -> None:
        # the worker's link down (a cable, a switch) as the job replays round 0 after the agent's restart:
        # once its RolloutManager on the worker wrote a step's metrics, the job's next call to the
        # worker's ranks waits until Ray's health check declares the node dead, and fails node-lost.
        # The link comes back once the run recorded that restart: the worker's Ray, dead to the head's
        # GCS, ends, and its agent joins again on its own.
        ip = ["ip", "-n", pair["worker"]["ns"], "link", "set", pair["worker"]["iface"]]
        if "cut" not in story:
            if len(round0.read_text().splitlines()) > story["round0_lines"]:
                story["restarts_before_cut"] = len(run.restarts())
                story["rejoins_before_cut"] = node_json(pair).get("rejoins", 0)
                subprocess.run([*ip, "down"], check=True)
                story["cut"] = time.time()
        elif "cut_restart" not in story:
            # (the cut's length is the fault played, not a wait for an event: at least CUT_S, past Ray's
            # 60 s for a raylet to reach its GCS again, and until the run recorded its restart)
            if len(run.restarts()) > story["restarts_before_cut"] and time.time() - story["cut"] >= CUT_S:
                story["cut_restart"] = run.restarts()[story["restarts_before_cut"]]
                subprocess.run([*ip, "up"], check=True)
                story["cut_for_s"] = time.time() - story["cut"]
        elif "cut_rejoined" not in story:
            beat = node_json(pair)
            if beat.get("rejoins", 0) > story["rejoins_before_cut"] and beat.get("ray_started"):
                story["cut_rejoined"] = beat

    def lose_and_rejoin_the_worker(pair: dict) -> None:
        if "killed" not in story:
            if metrics.is_file() and metrics.read_text().strip():  # round 1's first step is done
                raylet = ray_process(pair["worker"]["ns"], b"/raylet", pair["worker"]["addr"])
                if raylet:
                    story["rejoins_before_kill"] = node_json(pair).get("rejoins", 0)
                    os.kill(raylet, signal.SIGKILL)
                    story["killed"] = raylet
        elif "rejoined" not in story:  # its agent starts its Ray again: no hand on the worker
            beat = node_json(pair)
            if beat.get("rejoins", 0) > story["rejoins_before_kill"] and beat.get("ray_started"):
                story["rejoined"] = beat

    def lose_the_head_s_ray(pair: dict) -> None:
        # the job held after round 1's last step: the head's GCS killed (the OOM killer's SIGKILL); once
        # the run recorded its restart and the restart ended the held driver, the gate is opened for
        # the resumed job; then the worker's agent joins the new head. (Not opened earlier: the
        # stand-in's driver writes the step's checkpoint itself, where slime's needs its ranks, the head's
        # among them, dead with the head's Ray: a held driver let go would save a step slime could not.)
        if "gcs_killed" not in story:
            if Path(f"{held(GCS_KILLED_AFTER)}.held").is_file():
                gcs = ray_process(pair["head"]["ns"], b"/gcs_server")
                driver = int(Path(f"{held(GCS_KILLED_AFTER)}.held").read_text().split("(pid ")[1].rstrip(")\n"))
                if gcs:
                    story["driver"] = (driver, procfs.start_ticks(driver))
                    story["restarts_before_gcs"] = len(run.restarts())
                    story["rejoins_before_gcs"] = node_json(pair).get("rejoins", 0)
                    os.kill(gcs, signal.SIGKILL)
                    story["gcs_killed"] = gcs
        elif "gcs_restart" not in story:
            if len(run.restarts()) > story["restarts_before_gcs"] and not procfs.is_alive(*story["driver"]):
                story["gcs_restart"] = run.restarts()[story["restarts_before_gcs"]]
                held(GCS_KILLED_AFTER).write_text("released\n")  # the resumed job plays round 1 again and goes on
        elif "gcs_rejoined" not in story:
            beat = node_json(pair)
            if beat.get("rejoins", 0) > story["rejoins_before_gcs"] and beat.get("ray_started"):
                story["gcs_rejoined"] = beat

    def running() -> bool:
        return current["switching"] or current["proc"].poll() is None

    def watch() -> None:
        while running():
            if not record.is_file():
                time.sleep(0.5)
                continue
            pair = json.loads(record.read_text())
            for me, other in (("head", "worker"), ("worker", "head")):
                roles[pair[me]["ns"]] = me  # (the killed driver's pair, then the resumed run's)
                for lst in listeners(pair[me]["ns"], owners) - seen:
                    seen.add(lst)
                    if lst.every_address and (me, lst.port) not in refused:  # called without the token, from the other node
                        refused[(me, lst.port)] = {"owner": lst.owner, **grpc_answers(
                            pair[other]["ns"], pair[me]["addr"], lst.port)}
            time.sleep(1.0)

    def lose() -> None:
        # its own thread, polling fast, one fault at a time in the run's order: the raylet dies as
        # round 1's second step starts (the moment the one-node fault tests kill at too); the others
        # while the job holds
        progress, since = len(story), time.monotonic()
        try:
            while running() and "gcs_rejoined" not in story:
                if len(story) != progress:
                    progress, since = len(story), time.monotonic()
                elif time.monotonic() - since > FAULT_GUARD_S:  # a hang guard, not a wait: see FAULT_GUARD_S
                    story["errors"].append(f"nothing happened for {FAULT_GUARD_S} s after {sorted(story)}")
                    break
                if record.is_file():
                    pair = json.loads(record.read_text())
                    if "whole" not in story:
                        if (run.run_dir / "nodes.json").is_file() and (run.run_dir / "slime-job.json").is_file():
                            story["whole"] = in_rehearsal(env, *pyhelpers_cmd("run", "status")).stdout
                    elif "driver_resumed" not in story:
                        kill_the_driver_and_resume(pair)
                    elif "agent_status" not in story:
                        kill_the_worker_s_agent(pair)
                    elif "cut_rejoined" not in story:
                        cut_the_worker_off(pair)
                    elif "rejoined" not in story:
                        lose_and_rejoin_the_worker(pair)
                    else:
                        lose_the_head_s_ray(pair)
                time.sleep(0.05)
        except Exception as exc:  # noqa: BLE001 -- reported by the tests, not lost in a thread
            story["errors"].append(repr(exc))
            for step in (DRIVER_KILLED_AFTER, AGENT_KILLED_AFTER, GCS_KILLED_AFTER):
                if not held(step).exists():  # a fault that failed to play: no job waits for it forever
                    held(step).write_text("released after an error in the test\n")

    threads = [threading.Thread(target=f, daemon=True) for f in (watch, lose)]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 2400  # (a bound a loaded machine must not reach: the run ends on its own)
        while running() and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        proc = current["proc"]
        if proc.poll() is None:
            proc.terminate()  # (bin/rehearse's two-node wrapper removes its namespaces on the way out)
            proc.wait(timeout=120)
        for t in threads:
            t.join(timeout=60)
        status_after = in_rehearsal(env, *pyhelpers_cmd("run", "status")).stdout
        stop_leftovers(env)
    pair = json.loads(record.read_text())
    out = "".join(path.read_text(errors="replace") for path in current["logs"])
    return {"rc": proc.returncode, "out": out, "pair": pair, "listeners": seen, "roles": roles,
            "refused": refused, "story": story, "status": story.get("whole", ""), "status_after": status_after,
            "env": env, "run": run, "killed": killed}


def _kill_a_rehearsal_then_make_stop(env: dict, run: Run, record: Path) -> dict:
    """`make rehearse NNODES=2` until its head has started its Ray (its services in their own groups in
    the head's namespace, the worker's `make join` waiting in the other), its process group SIGKILLed (a
    closed terminal, a killed session), then `make stop REHEARSAL=1`: the processes inside the pair when
    it was killed, and what was left of the pair after the kill and after the stop. (The rehearsal
    below starts afresh: no Ray is started again for this.)"""
    proc, log = start(env)
    try:
        wait_for("the head's Ray to start", lambda: (run.run_dir / "pids" / "ray-head.json").is_file(),
                 timeout=900, proc=proc, log=log)
        rec = json.loads(record.read_text())
        pair = netns.Pair(rec.get("tag", ""), netns.Node(**rec["head"]), netns.Node(**rec["worker"]))
        pids = inside(pair)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    after_kill = left_of(pair, pids)
    stop = in_rehearsal(env, str(ROOT / "bin" / "stop"))  # make stop REHEARSAL=1
    return {"pids": pids, "after_kill": after_kill, "after_stop": left_of(pair, pids),
            "stop": stop.stdout + stop.stderr, "out": log.read_text(errors="replace")}


def test_the_rehearsal_runs_on_two_nodes(two_node_rehearsal):
    r = two_node_rehearsal
    assert r["rc"] == 0, _ended(r, 3000)
    worker = r["pair"]["worker"]["addr"]
    assert f"node {worker} joined with {GPUS_PER_NODE} GPU(s)" in r["out"]
    assert "shared storage: 1 worker(s) read the head's nonces" in r["out"]
    leftover = [ns for ns in (r["pair"]["head"]["ns"], r["pair"]["worker"]["ns"])
                if ns in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout]
    assert not leftover, f"namespaces left behind: {leftover}"


def test_a_killed_two_node_rehearsal_leaves_nothing_after_make_stop(two_node_rehearsal):
    """Issue 41 item 3's acceptance: `make rehearse NNODES=2`, SIGKILL of its process group, `make stop
    REHEARSAL=1`: none of its namespaces, nsfs mounts, veth or processes is left."""
    killed = two_node_rehearsal["killed"]
    left = {what.split()[0] for what in killed["after_kill"]}
    assert {"namespace", "process"} <= left, f"the kill left nothing to remove: {killed['after_kill']}\n{killed['out'][-3000:]}"
    assert not killed["after_stop"], f"left after make stop REHEARSAL=1: {killed['after_stop']}\n{killed['stop']}"


def test_a_worker_whose_raylet_is_killed_mid_round_rejoins_and_the_run_resumes_to_the_same_result(
        two_node_rehearsal, reference):
    r = two_node_rehearsal
    story, run = r["story"], r["run"]
    _played(r, "killed", "the worker's raylet was never killed")
    # first: a run that waited in vain for it fails for this reason
    _played(r, "rejoined", "the worker's agent never joined again")
    assert story["rejoined"]["rejoins"] == story["rejoins_before_kill"] + 1, story["rejoined"]
    assert r["rc"] == 0, _ended(r, 6000)
    # round 1's job ran its RolloutManager on the head: only its training ranks were on the lost worker
    assert f"RolloutManager placed on {HEAD}" in slime_log(run), slime_log(run)[-3000:]
    restarts = run.restarts()
    assert [(e["stage"], e["round"], e["cause"]) for e in restarts] == [("train", 0, "node-lost"),  # the agent's kill
                                                                         ("train", 0, "node-lost"),  # the cut
                                                                         ("train", 1, "node-lost"),
                                                                         ("train", 1, "ray-lost")], _said(restarts)
    assert run.events("nodes-whole"), run.events()[-10:]
    assert "(JOIN_TIMEOUT) for the cluster to be whole" in r["out"], r["out"][-4000:]
    assert f"node {WORKER} worker, {GPUS_PER_NODE} GPU(s), alive" in r["out"], r["out"][-4000:]
    # resumed from the last checkpoint, nothing counted twice
    assert two_node_outcome(run) == outcome(reference.run), _why_not_equal(run)


def test_the_head_s_gcs_killed_on_two_nodes_is_ray_lost_and_the_worker_rejoins_on_its_own(
        two_node_rehearsal, reference):
    """Issue 41 item 1 on two nodes: the head's gcs_server SIGKILLed mid-training (the OOM killer) is
    `ray-lost`: the head's Ray is started again, the worker's node agent joins the new head on its own
    (no `make join` on the worker), training resumes from the last checkpoint to the uninterrupted
    result; the restart is in the events, `make status` and the report."""
    r = two_node_rehearsal
    story, run = r["story"], r["run"]
    _played(r, "gcs_killed", "the head's gcs_server was never killed")
    _played(r, "gcs_restart", "the run never restarted for the head's killed GCS")
    restart = story["gcs_restart"]
    assert (restart["stage"], restart["round"], restart["step"], restart["cause"]) == (
        "train", 1, GCS_KILLED_AFTER + 1, "ray-lost"), restart
    assert "the head's Ray is lost" in restart["excerpt"], restart
    _played(r, "gcs_rejoined", "the worker's agent never joined the new head")
    assert story["gcs_rejoined"]["rejoins"] == story["rejoins_before_gcs"] + 1, story["gcs_rejoined"]  # by the agent alone
    assert r["rc"] == 0, r["out"][-6000:]
    evs = run.events()
    lost_at = max(i for i, e in enumerate(evs) if e.get("kind") == "run-restart")
    assert any(e.get("kind") == "service-start" and e.get("service") == "ray-head" for e in evs[lost_at:]), evs[lost_at:]
    line = "run-restart round 1 train ray-lost"
    assert line in r["status_after"], r["status_after"]
    report = run.run_dir / "report"
    assert ("run-restart", "1", "train", "ray-lost") in {
        (row["kind"], row["round"], row["stage"], row["cause"]) for row in rows(report / "restarts.csv")}
    assert line in (report / "index.html").read_text()
    assert two_node_outcome(run) == outcome(reference.run), _why_not_equal(run)


def test_a_two_node_rehearsal_whose_driver_is_killed_mid_round_resumes_and_ends_as_the_reference(
        two_node_rehearsal, reference):
    """Issue 41 (the driver SIGKILLed on two nodes): `make rehearse NNODES=2`'s process group SIGKILLed
    while round 0 trains, then `make rehearse NNODES=2 RESUME=1`: the kill is recorded (driver-lost),
    the killed run's pair of namespaces and all in it are reclaimed, and the run ends as the
    uninterrupted reference."""
    r = two_node_rehearsal
    story, run = r["story"], r["run"]
    _played(r, "driver_killed", "the driver was never killed")
    _played(r, "driver_resumed", "the resumed run never submitted its job")
    lost = run.events("driver-lost")
    assert [(e["round"], e["stage"]) for e in lost] == [(0, "train")], lost
    old, new = story["old_pair"], r["pair"]
    assert old["tag"] != new["tag"], (old, new)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    assert not {old["head"]["ns"], old["worker"]["ns"]} & set(listed), listed
    assert r["rc"] == 0, r["out"][-6000:]
    assert two_node_outcome(run) == outcome(reference.run), _why_not_equal(run)


def test_a_worker_s_killed_node_agent_is_started_again_by_its_keeper_and_the_run_ends_as_the_reference(
        two_node_rehearsal, reference):
    """Issue 41 (a worker's node agent SIGKILLed): its keeper (launch/node_keeper.py) ends the Ray node the
    agent left and starts the agent again, which joins the head on its own; the held job's save meets
    its lost ranks (as slime's would), the run restarts node-lost from round 0's start and ends as the
    reference. `make status` says the agent was started again."""
    r = two_node_rehearsal
    story, run = r["story"], r["run"]
    _played(r, "agent_killed", "the worker's node agent was never killed")
    _played(r, "agent_replaced", "no keeper started the agent again")
    _played(r, "agent_restart", "the run never restarted for the lost worker")
    restart = story["agent_restart"]
    assert (restart["stage"], restart["round"], restart["cause"]) == ("train", 0, "node-lost"), restart
    worker = r["pair"]["worker"]["addr"]
    assert "its node agent was killed and started again (1 time(s))" in story.get("agent_status", ""), story
    log = (run.run_dir / "nodes" / worker / "logs" / "ray-worker.log").read_text(errors="replace")
    assert "the node agent was killed (signal 9): ending what it left, then starting it again (1 of 3)" in log, log[-3000:]
    assert r["rc"] == 0, r["out"][-6000:]
    assert two_node_outcome(run) == outcome(reference.run), _why_not_equal(run)


def test_a_worker_cut_off_from_the_head_is_node_lost_and_rejoins_once_its_link_is_back(two_node_rehearsal, reference):
    """Issue 41 (a partition): the worker's link down in its namespace while the job trains; Ray's health
    check declares the node dead, the job fails `node-lost` and the restart waits for the worker; the link
    back up, the worker's Ray (dead to the head's GCS) ends and its agent joins again on its own, and
    the run ends as the reference."""
    r = two_node_rehearsal
    story, run = r["story"], r["run"]
    _played(r, "cut", "the worker was never cut off")
    _played(r, "cut_restart", "the run never restarted for the cut-off worker")
    restart = story["cut_restart"]
    assert (restart["stage"], restart["round"], restart["cause"]) == ("train", 0, "node-lost"), restart
    _played(r, "cut_rejoined", "the worker never joined again")
    assert story["cut_rejoined"]["rejoins"] == story["rejoins_before_cut"] + 1, story["cut_rejoined"]
    assert r["rc"] == 0, r["out"][-6000:]
    assert two_node_outcome(run) == outcome(reference.run), _why_not_equal(run)


def test_status_lists_both_nodes(two_node_rehearsal):
    r = two_node_rehearsal
    head, worker = r["pair"]["head"]["addr"], r["pair"]["worker"]["addr"]
    assert "nodes: 2 of 2 up" in r["status"], r["status"]
    lines = r["status"].splitlines()
    assert any(ln.split()[:2] == ["head", head] for ln in lines), r["status"]
    assert any(ln.split()[:2] == ["worker", worker] and ln.rstrip().endswith("up") for ln in lines), r["status"]
    # taken from this host, as a user types `make status REHEARSAL=1`: it still reaches the head's Ray,
    # whose job API answers on the loopback of the head's namespace only
    assert "job API does not answer" not in r["status"], r["status"]


def test_nothing_listens_beyond_loopback_and_the_node_addresses(two_node_rehearsal):
    """Every listener of the run binds loopback or its own node's address; where Ray binds every address
    (its C++ gRPC servers: docs/multinode.md §4) the listener refuses a caller without the token."""
    r = two_node_rehearsal
    assert r["listeners"], "no listener was seen: the watcher did not run"
    allowed = {"head": {"127.0.0.1", "::1", r["pair"]["head"]["addr"]},
               "worker": {"127.0.0.1", "::1", r["pair"]["worker"]["addr"]}}
    role = r["roles"]
    wrong = sorted(f"{role[x.ns]} {x.addr}:{x.port} ({x.owner})" for x in r["listeners"]
                   if not x.every_address and x.addr not in allowed[role[x.ns]])
    assert not wrong, f"listeners on addresses other than loopback and NODE_ADDR: {wrong}"
    every = sorted((role[x.ns], x.port) for x in r["listeners"] if x.every_address)
    assert every, "Ray's gRPC servers were expected on every address"
    checked: set[str] = set()
    for key in every:
        answers = dict(r["refused"].get(key, {}))
        owner = answers.pop("owner", "?")
        assert answers, f"{key} ({owner}): never called"
        if answers == {"probe": NAMESPACE_GONE}:
            continue  # its pair (the killed run's) was removed before the call: it listens on nothing now
        assert "probe" not in answers, f"{key} ({owner}): the call failed: {answers['probe']}"
        assert "OK" not in answers.values(), f"{key} ({owner}) answered a caller without the token: {answers}"
        if "UNAVAILABLE" in answers.values():
            continue  # closed before or while it was called (a job's worker that ended): it listens on nothing now
        assert "UNAUTHENTICATED" in answers.values(), f"{key} ({owner}) is not a token-checked Ray gRPC server: {answers}"
        checked.add(_kind(owner))
    # Each kind of Ray server that binds every address was caught listening and refused a caller.
    assert {"gcs_server", "raylet", "ray worker"} <= checked, f"refusals seen only from {sorted(checked)}"


def _kind(owner: str) -> str:
    for name in ("gcs_server", "raylet"):
        if f"/{name} " in owner or owner.startswith(name):
            return name
    return "ray worker" if owner.startswith(("ray::", "ray_")) or "default_worker.py" in owner else owner[:40]


def test_two_nodes_place_ranks_on_both_the_plugin_plays_from_the_worker_and_the_run_ends_as_on_one(
        two_node_rehearsal, reference):
    assert two_node_rehearsal["rc"] == 0, two_node_rehearsal["out"][-6000:]
    run = Run(Path(two_node_rehearsal["env"]["RUNS_DIR"]))
    log = slime_log(run)
    ranks = ranks_of(log)
    n = len(ranks)
    assert n == 2 * GPUS_PER_NODE and sorted(ranks, key=int) == [str(r) for r in range(n)], log[-3000:]
    on = {int(r): line.split()[5].rstrip(":") for r, line in ranks.items()}
    # both nodes, NUM_GPUS ranks each, the head's first (slime sorts the bundles by node IP)
    assert [on[r] for r in range(n)] == [HEAD] * (n // 2) + [WORKER] * (n // 2), ranks
    for r, line in ranks.items():  # each rank saw its own node's address and interface, and no proxy
        assert f"SLIME_HOST_IP={on[int(r)]} " in line and "proxies=none" in line, line
        assert "NCCL_SOCKET_IFNAME==" in line and "GLOO_SOCKET_IFNAME=" in line, line
    assert f"RolloutManager placed on {WORKER}" in log, log[-3000:]
    assert f"RolloutManager on {WORKER}: SLIME_HOST_IP={WORKER} proxies=none" in log, log[-3000:]
    # the plugin, on the worker, played every step's episodes through ShopSimulator's gate
    metrics = [line for r in range(2) for line in (run.round_dir(r) / "rollout_metrics.jsonl").read_text().splitlines()]
    # (round 1's resumed step 2 after the worker was lost is played again, so its line is there twice)
    assert sorted({json.loads(line)["rollout_id"] for line in metrics}) == [0, 1, 2, 3], metrics
    yaml = (run.round_dir(0) / "slime.yaml").read_text()
    assert f"shopsimrl_shopsim_url: http://{HEAD}:" in yaml and "shopsimrl_shopsim_token_path:" in yaml, yaml
    assert two_node_outcome(run) == outcome(reference.run), _why_not_equal(run)
    # W&B: slime's own run records the job's node count in its config (slime/observability/wandb_utils.py:58)
    assert wandb_actor_num_nodes(run) == ["2"]
    report = (run.run_dir / "report" / "index.html").read_text()
    assert "on the CPU as 2 nodes (network namespaces of one machine)" in report, report[:2000]


def _said(restarts: list[dict]) -> str:
    """The run's restarts, one line each with the words that decided its cause (a dict's repr is cut)."""
    return "\n".join(f"{e.get('at')} {e.get('stage')} round {e.get('round')} step {e.get('step')}: {e.get('cause')}: "
                     f"{e.get('excerpt')}" for e in restarts)


def _ended(r: dict, chars: int) -> str:
    """How a failed run ended: the driver's last words, then what the worker's node agent said of its
    Ray (when each start ended and why; on CI the agent's log is all there is of the worker's side)."""
    log = r["run"].run_dir / "nodes" / r["pair"]["worker"]["addr"] / "logs" / "ray-worker.log"
    agent = [ln for ln in (log.read_text(errors="replace").splitlines() if log.is_file() else [])
             if any(said in ln for said in ("this node's Ray", "the head's GCS", "stopping this worker",
                                            "the node agent was"))]
    return (r["out"][-chars:] + f"\n--- the worker's node agent ({log}):\n" + "\n".join(agent[-30:])
            + "\n--- restarts:\n" + _said(r["run"].restarts()))


def _played(r: dict, step: str, never: str) -> None:
    """The shared rehearsal's story reached `step` (what happened otherwise: `never`, its steps, the log's end)."""
    assert not r["story"]["errors"], r["story"]["errors"]
    assert r["story"].get(step), f"{never}: {sorted(r['story'])}\n" + r["out"][-6000:]


def _why_not_equal(run: Run) -> str:
    """What differs from one node's run usually has one cause: an episode ended in an infra error."""
    infra = [json.loads(line)["metrics"].get("rollout/shopsim/infra_errors") for r in range(2)
             for line in (run.round_dir(r) / "rollout_metrics.jsonl").read_text().splitlines()]
    gate = (run.run_dir / "logs" / "shopsim-gate.log").read_text(errors="replace")[-3000:]
    return f"infra errors per step: {infra}; ShopSimulator's gate log:\n{gate}"


# --- What a killed two-node rehearsal leaves (issue 41 item 3) ---------------------------------------
# A pair of namespaces as a SIGKILLed `make rehearse NNODES=2` leaves it: recorded in twonode.json with
# its owner, and processes running inside both namespaces (one of them ignoring TERM). A knob value
# that both nodes' commands refuse at once (ROUNDS=abc) ends a rehearsal started beside it before any
# Ray, once its two-node wrapper has done what it does first.

@contextlib.contextmanager
def _stale_pair(runs: Path, owner: tuple[int, int]):
    pair = netns.Pair.create()
    procs = [subprocess.Popen(node.exec_argv(cmd), start_new_session=True)
             for node in (pair.head, pair.worker) for cmd in (["sleep", "3600"], ["sh", "-c", "trap '' TERM; exec sleep 3600"])]
    try:
        record = runs / ".rehearsal" / "twonode.json"
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"tag": pair.tag, "head": dataclasses.asdict(pair.head),
                                      "worker": dataclasses.asdict(pair.worker),
                                      "owner": {"pid": owner[0], "start_ticks": owner[1], "host": procfs.hostname()}}))
        pids = {p.pid: procfs.start_ticks(p.pid) for p in procs}
        while not set(pids) <= set(inside(pair)):  # (`ip netns exec` enters the namespace, then execs)
            time.sleep(0.05)
        yield pair, pids
    finally:
        pair.remove()
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                p.kill()
            p.wait()


def _broken_env(tmp_path: Path, rehearsal_world: Path) -> dict:
    return rehearse_env(tmp_path, rehearsal_world, tracked=False, NNODES=2, ROUNDS="abc")


def _dead_process() -> tuple[int, int]:
    p = subprocess.Popen(["true"])
    owner = (p.pid, procfs.start_ticks(p.pid))
    p.wait()
    return owner


def test_make_stop_removes_what_a_killed_two_node_rehearsal_left(tmp_path, rehearsal_world):
    need_root()
    env = rehearse_env(tmp_path, rehearsal_world, tracked=False)
    with _stale_pair(Path(env["RUNS_DIR"]), _dead_process()) as (pair, pids):
        r = in_rehearsal(env, str(ROOT / "bin" / "stop"))  # make stop REHEARSAL=1
        assert not left_of(pair, pids), f"left after make stop REHEARSAL=1: {left_of(pair, pids)}\n{r.stdout}{r.stderr}"


def test_the_next_two_node_rehearsal_removes_what_a_killed_one_left(tmp_path, rehearsal_world):
    need_root()
    env = _broken_env(tmp_path, rehearsal_world)
    with _stale_pair(Path(env["RUNS_DIR"]), _dead_process()) as (pair, pids):
        r = rehearse(env, "--resume", timeout=600)  # make rehearse NNODES=2 RESUME=1
        assert r.returncode != 0 and "ROUNDS='abc'" in r.stdout, r.stdout[-3000:]
        assert not left_of(pair, pids), f"left after the next rehearsal: {left_of(pair, pids)}\n{r.stdout[-3000:]}"


def test_a_second_two_node_rehearsal_is_refused_while_the_first_runs(tmp_path, rehearsal_world):
    need_root()
    env = _broken_env(tmp_path, rehearsal_world)
    owner = subprocess.Popen(["sleep", "3600"])
    try:
        with _stale_pair(Path(env["RUNS_DIR"]), (owner.pid, procfs.start_ticks(owner.pid))) as (pair, pids):
            r = rehearse(env, timeout=600)
            assert r.returncode == 1 and f"a two-node rehearsal is running (pid {owner.pid}" in r.stdout, r.stdout[-3000:]
            assert "make stop REHEARSAL=1" in r.stdout
            assert len(left_of(pair, pids)) == 2 * 2 + len(pids), "the running rehearsal's pair was touched"
            record = Path(env["RUNS_DIR"]) / ".rehearsal" / "twonode.json"
            assert json.loads(record.read_text())["tag"] == pair.tag, "its record was replaced"
    finally:
        owner.kill()
        owner.wait()
