"""The fault matrix of issue 41 (docs/multinode.md §faults): each process of the run's Ray SIGKILLed as
the OOM killer would, each healed without a hand on any node, the run ending with the uninterrupted
reference's results and nothing of it left. One rehearsal per topology plays its faults in sequence,
each at its own held step (the stand-in slime's FAKE_SLIME_HOLD_AT gates) and each released only once
the event that says it was classified and restarted is recorded; the tests read that shared record.

- `one_node`: one rehearsal (ROUNDS=2): the head's raylet killed after round 0's step 0, its
  dashboard after step 1, its gcs_server after round 1's step 2 (`ray-lost` each: the head's Ray
  is restarted and training resumes from the last checkpoint).
The driver SIGKILLed at every stage (one node) is tests/test_faults.py's kill matrix.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest
from support.rehearsal import (
    Hook,
    Run,
    assert_stopped,
    in_rehearsal,
    outcome,
    pyhelpers_cmd,
    ray_temp_dir,
    recorded_groups,
    rehearse_env,
    rows,
    start,
    stop_leftovers,
    wait_for,
)

from pyhelpers.procs import procfs, ready

pytestmark = pytest.mark.heavy  # a whole rehearsal whose Ray is killed three times

# (fault, the step after which the job holds for it, what is killed: a test on the process's argv)
ONE_NODE = (
    ("head-raylet", 0, lambda argv: argv[0].endswith("/raylet")),
    ("head-dashboard", 1, lambda argv: any(a.endswith("/dashboard/dashboard.py") for a in argv)),
    ("head-gcs", 2, lambda argv: argv[0].endswith("/gcs_server")),
)


def _ray_process(ray_temp: str, is_it) -> int:
    """The pid of the one process of the head's Ray session under `ray_temp` (only ours) that `is_it`."""
    found = [pid for pid in procfs.marker_matches(ray_temp) if is_it(procfs.cmdline(pid).split(" "))]
    assert len(found) == 1, f"processes of {ray_temp}: {found}"
    return found[0]


def _listening(env: dict) -> list[str]:
    """The run's own ports (rehearse_env's) that still take a connection on loopback."""
    names = ("RAY_PORT", "RAY_DASHBOARD_PORT", "SHOPSIM_PORT", "EVAL_PORT")
    return [f"{n}={env[n]}" for n in names if ready.tcp_probe("127.0.0.1", int(env[n]))()[0]]


@pytest.fixture(scope="module")
def one_node(tmp_path_factory, rehearsal_world):
    tmp = tmp_path_factory.mktemp("one-node-faults")
    gate, hook = tmp / "hold", Hook()
    env = rehearse_env(tmp, rehearsal_world, tracked=False, dotenv={"NOTIFY_WEBHOOK": hook.url}, REHEARSAL_NOTIFY="1",
                       NOTIFY_FORMAT="feishu", RESTART_BACKOFF="0.5", FAKE_SLIME_HOLD_AT=",".join(str(step) for _, step, _ in ONE_NODE),
                       FAKE_SLIME_HOLD_GATE=str(gate))
    run = Run(tmp / "runs")
    ray_temp = ray_temp_dir(env)
    killed: dict[str, dict] = {}
    proc, log = start(env)
    try:
        for fault, step, is_it in ONE_NODE:
            wait_for(f"the job to hold after step {step}", Path(f"{gate}-{step}.held").is_file, proc=proc, log=log,
                     timeout=900)
            restarts = len(run.events("run-restart"))
            head = {"ray-head": recorded_groups(run)["ray-head"]}
            os.kill(_ray_process(ray_temp, is_it), signal.SIGKILL)
            wait_for(f"the run to restart for its killed {fault}", lambda n=restarts: len(run.events("run-restart")) > n,
                     proc=proc, log=log, timeout=600)
            killed[fault] = {"head": head, "restart": run.events("run-restart")[restarts]}
            Path(f"{gate}-{step}").write_text("released\n")  # the resumed job plays the step again and goes on
        rc = proc.wait(timeout=900)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=120)
        hook.close()
    left = {"ray": procfs.marker_matches(ray_temp), "ports": _listening(env), "lock": run.lock_holder(),
            "pids": sorted(p.name for p in (run.run_dir / "pids").glob("*.json"))}
    status = in_rehearsal(env, *pyhelpers_cmd("run", "status")).stdout
    stop_leftovers(env)
    return {"rc": rc, "out": log.read_text(errors="replace"), "run": run, "env": env, "killed": killed, "left": left,
            "status": status, "posts": hook.posts, "hook_url": hook.url}


@pytest.mark.parametrize("fault", [f for f, _, _ in ONE_NODE])
def test_a_killed_process_of_the_head_s_ray_is_ray_lost_and_restarted(one_node, fault):
    """Issue 41 item 1: the head's raylet, dashboard or gcs_server SIGKILLed mid-training on one node
    is `ray-lost`: the head's Ray is started again (its killed group stopped) and training resumes
    from the last checkpoint; the restart is in the events, `make status` and the report."""
    assert one_node["rc"] == 0, one_node["out"][-5000:]
    restart = one_node["killed"][fault]["restart"]
    step = next(s for f, s, _ in ONE_NODE if f == fault)
    assert (restart["stage"], restart["round"], restart["step"], restart["cause"]) == (
        "train", step // 2, step + 1, "ray-lost"), restart
    assert "the head's Ray is lost" in restart["excerpt"], restart
    assert_stopped(one_node["killed"][fault]["head"], by="the ray-lost restart")
    line = f"run-restart round {step // 2} train ray-lost"
    assert "restart: " in one_node["status"] and line in one_node["status"], one_node["status"]
    report = one_node["run"].run_dir / "report"
    assert ("run-restart", str(step // 2), "train", "ray-lost") in {
        (r["kind"], r["round"], r["stage"], r["cause"]) for r in rows(report / "restarts.csv")}
    assert line in (report / "index.html").read_text()


def test_the_faults_of_one_node_heal_to_the_uninterrupted_result_and_leave_nothing(one_node, reference):
    """Every restart in order, the run's results equal to the uninterrupted reference's, and after the
    end no process of its Ray, no port, lock or pidfile."""
    assert one_node["rc"] == 0, one_node["out"][-5000:]
    run = one_node["run"]
    assert [(e["round"], e["step"], e["cause"]) for e in run.restarts()] == [
        (0, 1, "ray-lost"), (0, 2, "ray-lost"), (1, 3, "ray-lost")]
    evs = run.events()
    lost_at = next(i for i, e in enumerate(evs) if e.get("kind") == "run-restart")
    assert any(e.get("kind") == "service-start" and e.get("service") == "ray-head" for e in evs[lost_at:])
    assert outcome(run) == outcome(reference.run)
    assert one_node["left"] == {"ray": {}, "ports": [], "lock": None, "pids": []}, one_node["left"]


def test_each_restart_of_one_node_is_notified_and_the_webhook_is_nowhere_in_the_run(one_node):
    texts = [body["content"]["text"] for _, body in one_node["posts"]]
    assert all(t.startswith("ShopSimRL [rehearsal] ") for t in texts)
    kinds = [("start" if "run started" in t else "round 0" if "round 0 of 2 done" in t else "restart"
              if re.search(r"restart \d+:", t) else "round 1" if "round 1 of 2 done" in t
              else "done" if "run finished" in t else t) for t in texts]
    assert kinds == ["start", "restart", "restart", "round 0", "restart", "round 1", "done"], texts
    assert "val success" in texts[3] and "gate:" in texts[3]
    # NOTIFY_WEBHOOK is a secret: in no file of the run, its logs or W&B data
    url = one_node["hook_url"].encode()
    run = one_node["run"]
    assert [p for p in run.runs.rglob("*") if p.is_file() and url in p.read_bytes()] == []
