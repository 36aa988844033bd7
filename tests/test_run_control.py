"""Controlling a run from outside, on the stand-ins: `make stop` from another shell, a second
`make train` refused naming the holder, the placement deadline, a ShopSimulator that dies during a
round, `make watch` on a live run, and the real-stack helpers `make smoke` / `make convert-base`
wired to the stand-ins."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import ROOT
from support.rehearsal import (
    NO_WANDB,
    Run,
    event_seen,
    frozen,
    group_alive,
    in_rehearsal,
    outcome,
    own_ports,
    pyhelpers_cmd,
    ray_temp_dir,
    recorded_groups,
    rehearse,
    rehearse_env,
    running,
    start,
    stop_leftovers,
    wait_for,
)

from pyhelpers.procs import ports, procfs


def _planned(plan) -> dict[str, str]:
    """{name: command line} from `make plan`'s command lines (notes are on their own lines)."""
    assert plan.returncode == 0, plan.stderr
    section = plan.stdout.split("\ncommand lines", 1)[1]
    return {m[1]: m[2] for m in re.finditer(r"^  (\S[^:]*): (.+)$", section, flags=re.M)}


def _launched(run) -> dict[str, list[str]]:
    """{name: [command lines]} the run started: every service's log opens with its command line,
    and Ray logs each job's entry point in the job's log (our copy: slime-log.log)."""
    out: dict[str, list[str]] = {}
    for log in sorted((run.run_dir / "logs").glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if m := re.match(r"==> \S+ start (\S+): (.*)$", line):
                out.setdefault(m[1], []).append(m[2])
            elif m := re.match(r"Running entrypoint for job \S+: (.*)$", line):
                out.setdefault("slime job", []).append(" ".join(shlex.split(m[1])))
    return out


@pytest.mark.timeout(600)  # a stopped run, then the whole run again (and the reference if not yet built)
def test_make_stop_from_another_shell_leaves_nothing_then_make_resume_finishes_the_run(tmp_path, rehearsal_world,
                                                                                     reference):
    # (W&B on: the plan-against-launched check below; support/rehearsal.py NO_WANDB)
    env = rehearse_env(tmp_path, rehearsal_world, FAKE_SLIME_STEP_DELAY=3)
    run = Run(tmp_path / "runs")
    proc, log = start(env)
    wait_for("training to start", lambda: (run.round_dir(0) / "plugin.started").is_file(), proc=proc, log=log)
    driver = run.lock_holder()["pid"]
    # the services of training, taken now: under load the refused starts below can outlast round 0's
    # training (a fresh-clone CI with 4 workers found the run in its export by then)
    training = recorded_groups(run)
    assert {"shopsim", "ray-head", "analyst", "slime-log"} <= set(training)

    second = in_rehearsal(env, "bin/train", "--rehearsal")  # what a second `make train` runs
    assert second.returncode == 1
    assert "this run is already in progress" in second.stderr and f"held by pid {driver} on host" in second.stderr
    assert "stop it with `make stop REHEARSAL=1`" in second.stderr  # the rehearsal's own command
    again = rehearse(env, timeout=300)  # a fresh `make rehearse` must not touch the running one
    assert again.returncode == 1 and "this run is already in progress" in again.stdout

    groups = {**{f"{name} (training)": pgid for name, pgid in training.items()}, **recorded_groups(run)}
    stopped = in_rehearsal(env, *pyhelpers_cmd("run", "stop"), timeout=180)
    assert stopped.returncode == 0, stopped.stderr
    assert f"driver pid {driver}: stopped" in stopped.stdout
    assert proc.wait(timeout=300) != 0
    for name, pgid in groups.items():
        assert not group_alive(pgid), f"{name} (pgid {pgid}) still has processes"
    assert procfs.marker_matches(ray_temp_dir(env)) == {}  # no Ray process of this run either
    for knob in ("SHOPSIM_PORT", "EVAL_PORT", "RAY_PORT", "RAY_DASHBOARD_PORT"):
        assert ports.port_free("127.0.0.1", int(env[knob])), knob
    assert run.lock_holder() is None
    status = in_rehearsal(env, *pyhelpers_cmd("run", "status"))
    assert "driver: not running (stopped by `make stop" in status.stdout  # (REHEARSAL=1` in a rehearsal)
    assert not run.events("run-restart")  # the self-healing loop never restarts after a stop
    plan_out = in_rehearsal(env, "bin/plan")
    planned = _planned(plan_out)

    # `make resume` continues the stopped run to the uninterrupted run's result. Its steps at full
    # speed: the delay only kept round 0 in training while the refused starts and the stop ran.
    resumed = rehearse({**env, "FAKE_SLIME_STEP_DELAY": "0"}, "--resume")
    assert resumed.returncode == 0, resumed.stdout[-5000:]
    assert "continuing run rehearsal, stopped by `make stop" in resumed.stdout
    # its first lines in the toolkit's format; the check of the user's inputs is not about a new run.
    # Any round: under load (two CI clones at once) round 0's training ended during the refused
    # starts above, and the stop found the run rotating in round 1 -- the same stop, a later point.
    assert re.search(r"^\d\d:\d\d:\d\d train    resuming rehearsal: round \d+ at ", resumed.stdout, re.M), \
        resumed.stdout[:3000]
    assert "a new run" not in resumed.stdout, resumed.stdout[:3000]
    assert not run.events("run-restart")
    assert outcome(run) == outcome(reference.run)
    status = in_rehearsal(env, *pyhelpers_cmd("run", "status"))
    assert "stopped by `make stop" not in status.stdout

    # `make plan` showed what then ran: each command line exactly as launched, nothing invented.
    launched = _launched(run)
    other = planned.pop("slime job (ONE_JOB=0)")  # the mode this run did not choose, shown for comparison
    assert "--eval-function-path" not in other and " ".join(shlex.split(other)) not in launched.get("slime job", [])
    # ONE_JOB=1 (the default): the job's hook evaluated every round; the eval server the plan lists
    # is for a round whose job ended first, and the plan says so
    planned.pop("eval-server")
    assert "(only for a round whose job ended before" in plan_out.stdout and "eval-server" not in launched
    for name, line in planned.items():
        if name != "evaluate":  # in the job's hook: the plan says so instead of a command
            assert " ".join(shlex.split(line)) in launched.get(name, []), (name, line, launched.get(name))
    assert "no command line: the slime job's eval hook" in planned["evaluate"]
    assert set(launched) - {"slime-log"} <= set(planned)  # slime-log: our copy of the job's log


def test_a_job_without_its_gpus_is_stopped_at_the_placement_deadline(tmp_path, rehearsal_world):
    env = rehearse_env(tmp_path, rehearsal_world, ROUNDS=1, JOB_START_TIMEOUT=15, FAKE_SLIME_EXTRA_GPUS=1, **NO_WANDB)
    run = Run(tmp_path / "runs")
    copy = run.run_dir / "logs" / "slime-log.log"
    proc, log = start(env)
    # The deadline is wall time from the submission; the job's Python may take longer than that to
    # reach its placement on a loaded machine. So the driver is held (stopped) from the moment its
    # copy of the job's log runs -- just before its deadline starts -- until that copy shows the
    # job waiting for its GPUs; then the deadline must stop the job.
    wait_for("the copy of the job's log to run", lambda: running(run, "slime-log", "tail"), proc=proc, log=log)
    with frozen({"driver": os.getpgid(run.lock_holder()["pid"])}):
        assert not run.events("job-end"), "the deadline fired before the test could hold the driver"
        wait_for("the job to wait for its GPUs", lambda: "Waiting for placement group of 5 GPUs" in copy.read_text(),
                 proc=proc, log=log)
    assert proc.wait(timeout=600) == 1, log.read_text()[-4000:]
    out = log.read_text()
    assert "did not start training within 15 s (JOB_START_TIMEOUT)" in out
    assert "fewer GPUs than NUM_GPUS are free" in out
    assert recorded_groups(run) == {}  # the driver stopped everything on its way out
    job = json.loads((run.run_dir / "slime-job.json").read_text())
    assert event_seen(run, "job-end", round=0, job_id=job["submission_id"], status="START_TIMEOUT")


def test_shopsimulator_dying_during_a_round_is_restarted(tmp_path, rehearsal_world, hang_hook):
    # and a notification webhook that never answers: it holds nothing up
    env = rehearse_env(tmp_path, rehearsal_world, dotenv={"NOTIFY_WEBHOOK": hang_hook.url}, REHEARSAL_NOTIFY="1", NOTIFY_TIMEOUT="1",
                       ROUNDS=1, FAKE_SLIME_STEP_DELAY=2, BASELINE_VAL=1, **NO_WANDB)  # and the base model's val first
    run = Run(tmp_path / "runs")
    proc, log = start(env)
    wait_for("training to start", lambda: (run.round_dir(0) / "plugin.started").is_file(), proc=proc, log=log)
    os.killpg(recorded_groups(run)["shopsim"], signal.SIGKILL)
    wait_for("the restart", lambda: event_seen(run, "service-ready", service="shopsim", round=0)
             and event_seen(run, "service-restart", service="shopsim", round=0), proc=proc, log=log)
    status = in_rehearsal(env, *pyhelpers_cmd("run", "status"))
    assert "restart:" in status.stdout and "service-restart round 0 shopsim" in status.stdout
    assert proc.wait(timeout=300) == 0, log.read_text()[-4000:]
    restarts = run.events("service-restart")
    assert len(restarts) == 1 and restarts[0]["count"] == 1
    assert (run.run_dir / "skillbank-final.json").is_file()
    assert "notification 'run-start' not sent: ReadTimeout (the run goes on)" in log.read_text()
    assert (run.run_dir / "baseline" / "val" / "summary.json").is_file()
    assert event_seen(run, "stage-end", round=0, stage="baseline", status=0)
    assert "  baseline   val success" in log.read_text()


def test_make_smoke_trains_and_exports_then_stops(tmp_path, rehearsal_world):
    # slime's --save-hf writes the export: the round-by-round order's (ONE_JOB=0) alone
    env = rehearse_env(tmp_path, rehearsal_world, SAVE_HF=1, ONE_JOB="0", **NO_WANDB)
    res = in_rehearsal(env, "bin/smoke", timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "stopping before compile, as asked" in res.stderr
    run = Run(tmp_path / "runs", "smoke")
    save = tmp_path / "runs" / ".rehearsal" / "train_save" / "smoke"
    assert (save / "hf").resolve().name == "hf-0000002"  # 3 steps: iterations 0..2
    assert not (run.round_dir(0) / "compiled.json").exists()
    cfg = json.loads((run.run_dir / "run.json").read_text())["config"]
    assert (cfg["NUM_GPUS"], cfg["TP_SIZE"], cfg["ROUNDS"], cfg["STEPS_PER_ROUND"]) == ("1", "1", "1", "3")
    assert "--actor-num-gpus-per-node 1" in (run.run_dir / "logs" / "slime-log.log").read_text()
    assert "--save-hf" in (run.run_dir / "logs" / "slime-log.log").read_text()
    # slime's --save-hf writes only what Megatron holds: Qwen3.5's visual tower is missing, so the
    # export stage completes it from HF_MODEL by hard links, checked name by name and shape by shape
    # (issue 29 cut 6) -- no converter run.
    assert not event_seen(run, "convert-start")
    assert json.loads((run.round_dir(0) / "stages" / "export.done").read_text())["converted"] is False
    export = save / "hf"
    assert any(p.stat().st_nlink > 1 for p in export.glob("origin-*.safetensors"))


def test_make_convert_base_stages_then_refuses_to_overwrite(tmp_path, rehearsal_world):
    env = rehearse_env(tmp_path, rehearsal_world)
    out = tmp_path / "models" / "base_torch_dist"
    res = in_rehearsal(env, "env", f"TORCH_DIST_MODEL={out}", f"MODELS_DIR={tmp_path / 'models'}", "bin/convert-base")
    assert res.returncode == 0, res.stderr
    assert (out / "latest_checkpointed_iteration.txt").read_text() == "release" and (out / "release").is_dir()
    assert not (tmp_path / "models" / "base_torch_dist.partial").exists()
    assert "--num-layers 32" in (tmp_path / "models" / "convert-base.log").read_text()  # slime's MODEL_ARGS
    again = in_rehearsal(env, "env", f"TORCH_DIST_MODEL={out}", f"MODELS_DIR={tmp_path / 'models'}", "bin/convert-base")
    assert again.returncode == 1 and "the torch_dist model already exists" in again.stderr


def test_make_train_continues_a_stop_made_before_it_started_never_one_made_while_it_starts(tmp_path):
    from types import SimpleNamespace

    from pyhelpers.errors import ToolkitError
    from pyhelpers.run.stop import clear_stop

    lay = SimpleNamespace(stopped_marker=tmp_path / "stopped")
    assert clear_stop(lay, 1000.0) is None  # not stopped: nothing to continue
    lay.stopped_marker.write_text("stopped by `make stop` at 2026-12-03 10:00:00\n")
    os.utime(lay.stopped_marker, (1000.0, 1000.0))
    with pytest.raises(ToolkitError, match="`make stop` was called while this run was starting"):
        clear_stop(lay, 999.5)  # make stop came after this make train started
    assert lay.stopped_marker.is_file()
    assert clear_stop(lay, 1000.5) == "stopped by `make stop` at 2026-12-03 10:00:00"
    assert not lay.stopped_marker.exists()


def _analyst_models(runs) -> dict[int, int]:
    """{pid: start ticks} of the rehearsal's analyst-model stand-ins (found by their command line)."""
    out = {}
    for pid in procfs.all_pids():
        line = procfs.cmdline(pid, limit=2000)
        if "openai_server.py" in line and str(runs) in line:
            out[pid] = procfs.start_ticks(pid)
    return out


def _make(env, *args, timeout=180) -> subprocess.CompletedProcess:
    return subprocess.run(["make", *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def held(tmp_path_factory, rehearsal_world):
    """One ROUNDS=1 rehearsal held after its first step until a test stops it, shared by `make watch`
    and the second start (each check happens during training, however slow a loaded machine runs
    it: 30 s steps were not enough for that). Module-scoped, so untracked: stopped here at the end.
    The second start's test stops it last (file order; one xdist worker runs the module's users)."""
    tmp = tmp_path_factory.mktemp("held")
    env = rehearse_env(tmp, rehearsal_world, tracked=False, ROUNDS=1, FAKE_SLIME_HOLD_BEFORE=f"1:{tmp / 'never'}",
                       **NO_WANDB)
    run = Run(tmp / "runs")
    log = tmp / "first.log"
    with open(log, "w") as fh:
        first = subprocess.Popen(["make", "rehearse"], env=env, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT,
                                 start_new_session=True)
    try:
        wait_for("the first step", lambda: event_seen(run, "step-done"), proc=first, log=log)
        yield {"env": env, "run": run, "first": first, "log": log, "tmp": tmp}
    finally:
        stop_leftovers(env)
        first.wait(timeout=300)


def test_make_watch_refreshes_the_status_until_ctrl_c(held):
    from support.tmux import Pane

    env, run, tmp = held["env"], held["run"], held["tmp"]
    pane = Pane(tmp, "make watch REHEARSAL=1 INTERVAL=1", env)
    try:
        first = pane.wait_for(r"^(\d\d:\d\d:\d\d)  refreshed every 1 s; Ctrl-C to leave", screen=True)
        screen = pane.screen()
        assert re.search(r"^progress: round 0 \(1 of 1\) train, step 1/2 done \(last: \d+ episodes", screen,
                         flags=re.M), screen
        assert re.search(r"ETA round \d+:\d\d, run \d+:\d\d", screen) and "driver: running" in screen
        later = pane.wait_for(r"^(\d\d:\d\d:\d\d)  refreshed every 1 s", screen=True)
        deadline = time.monotonic() + 300  # a bound on a hang: a loaded machine refreshes late
        while later.group(1) == first.group(1) and time.monotonic() < deadline:
            time.sleep(0.3)
            later = pane.wait_for(r"^(\d\d:\d\d:\d\d)  refreshed every 1 s", screen=True)
        assert later.group(1) != first.group(1), "make watch did not refresh"
        assert pane.screen().count("run rehearsal (rehearsal)") == 1  # redrawn in place
        pane.keys("C-c")
        deadline = time.monotonic() + 60
        while not pane.ended() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pane.ended(), "make watch did not end on Ctrl-C"
        assert "Traceback" not in pane.text()
    finally:
        pane.close()
    assert held["first"].poll() is None and run.lock_holder() is not None  # watching touched nothing


@pytest.mark.timeout(600)
def test_a_second_start_leaves_a_live_rehearsal_alone_and_every_hint_names_the_rehearsal_s_commands(held):
    """Issue 27 items 2, 4 and 14: a second `make rehearse` / `make train` touches nothing of the live
    rehearsal before the lock refuses it; `make stop`, the refusal, `make status REHEARSAL=1` and
    the preflight's fixes speak of the rehearsal; a requested stop is not an error. It stops the
    shared rehearsal: the module's last user of `held`."""
    env, run, first, log, tmp = held["env"], held["run"], held["first"], held["log"], held["tmp"]
    assert (run.round_dir(0) / "plugin.started").is_file() and first.poll() is None
    driver, model = run.lock_holder()["pid"], _analyst_models(tmp / "runs")
    assert len(model) == 1, model

    again = rehearse(env, timeout=120)  # a fresh `make rehearse` beside it
    assert _analyst_models(tmp / "runs") == model  # the live run's analyst model, untouched
    assert again.returncode == 1 and "this run is already in progress" in again.stdout
    assert "stop it with `make stop REHEARSAL=1`" in again.stdout, again.stdout[-3000:]
    second = in_rehearsal(env, "bin/train", "--rehearsal")  # what a second start runs once configured
    assert second.returncode == 1 and "stop it with `make stop REHEARSAL=1`" in second.stderr, second.stderr
    assert _analyst_models(tmp / "runs") == model  # the live run's analyst model, untouched
    assert run.lock_holder()["pid"] == driver and first.poll() is None

    # `make stop` without REHEARSAL=1 finds no real run: it says how to stop the rehearsal.
    real = _make(env, "stop")
    assert real.returncode == 0 and "`make stop REHEARSAL=1`" in real.stdout, real.stdout + real.stderr
    assert first.poll() is None

    # `make status REHEARSAL=1` from a shell with other ports shows those the services hold.
    other = {**env, **own_ports()}
    status = _make(other, "status", "REHEARSAL=1")
    assert status.returncode == 0, status.stderr
    assert re.search(rf"^  shopsim .* 127\.0\.0\.1:{env['SHOPSIM_PORT']} ", status.stdout, flags=re.M), status.stdout
    assert other["SHOPSIM_PORT"] not in status.stdout

    stopped = _make(env, "stop", "REHEARSAL=1")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert "continue it with `make rehearse RESUME=1`" in stopped.stdout and "make resume" not in stopped.stdout
    assert first.wait(timeout=120) == 0  # a requested stop is not an error ...
    out = log.read_text()
    assert "make: ***" not in out and "Error:" not in out, out[-3000:]
    assert "continue: make rehearse RESUME=1" in out  # ... and ends with the way to continue

    # The preflight's fix for a broken bank (the one round 0's training reads) names the rehearsal's resume.
    bank = run.round_dir(0) / "skillbank.json"
    assert bank.is_file() and not (run.round_dir(0) / "compiled.json").exists()
    bank.write_text("{not json")
    resumed = rehearse(env, "--resume", timeout=180)
    assert resumed.returncode == 1
    assert "make rehearse RESUME=1" in resumed.stdout and "`make resume`" not in resumed.stdout, resumed.stdout[-3000:]


def test_make_stop_on_a_finished_rehearsal_marks_nothing_stopped(tmp_path, reference):
    import shutil

    runs = tmp_path / "runs"
    shutil.copytree(reference.run.runs, runs, symlinks=True, ignore=shutil.ignore_patterns("world"))
    env = {**reference.env, "RUNS_DIR": str(runs)}
    run = Run(runs)
    res = in_rehearsal(env, *pyhelpers_cmd("run", "stop"))
    assert res.returncode == 0, res.stderr
    assert not run.run_dir.joinpath("stopped").exists(), res.stdout
    assert "finished" in res.stdout and "continue it" not in res.stdout, res.stdout


@pytest.mark.timeout(600)
def test_ctrl_c_pressed_again_and_again_during_evaluate_stops_everything_and_prints_the_hint(tmp_path,
                                                                                            rehearsal_world):
    """Issue 27 item 3: a second Ctrl-C used to interrupt the driver's cleanup (ShopSimulator, the Ray
    head and the eval server kept running), and one Ctrl-C ended in make's Error 141 (tee died
    first), losing the cleanup lines and the hint."""
    from support.tmux import Pane

    # (the round-by-round order, ONE_JOB=0: the evaluate stage's own eval server)
    env = rehearse_env(tmp_path, rehearsal_world, ROUNDS=1, ONE_JOB="0", FAKE_SGLANG_LATENCY_MS=300)
    run = Run(tmp_path / "runs")
    pane = Pane(tmp_path, "make rehearse", env)
    try:
        wait_for("evaluate", lambda: event_seen(run, "stage-start", stage="evaluate")
                 and "eval-server" in recorded_groups(run), timeout=400)
        groups = recorded_groups(run)
        assert {"shopsim", "ray-head", "eval-server"} <= set(groups), groups
        for _ in range(3):
            pane.keys("C-c")
            time.sleep(0.5)
        deadline = time.monotonic() + 180
        while not pane.ended() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pane.ended(), pane.text()[-3000:]
        text = pane.text()
        for name, pgid in groups.items():
            assert not group_alive(pgid), f"{name} (pgid {pgid}) survived:\n{text[-3000:]}"
        assert procfs.marker_matches(ray_temp_dir(env)) == {}
        for knob in ("SHOPSIM_PORT", "EVAL_PORT", "RAY_PORT", "RAY_DASHBOARD_PORT"):
            assert ports.port_free("127.0.0.1", int(env[knob])), knob
        from pyhelpers.run import lock

        assert lock.lock_free(run.run_dir / "lock")
        assert "continue: make rehearse RESUME=1" in text, text[-3000:]
        assert "Error 141" not in text and "Traceback" not in text, text[-3000:]
    finally:
        pane.close()


@pytest.mark.timeout(900)
def test_three_rehearsals_at_once_two_in_one_root_one_refused_touching_nothing_both_others_finish(
        tmp_path, rehearsal_world):
    """`make rehearse & make rehearse` in one checkout, and a third in another (its own ports) at the
    same moment. In one root (issue 27 item 2) the second used to restart the first's analyst-model
    stand-in before its lock refusal, and the first then finished rc 0 with an empty bank ("0
    processed"). Across two roots (issue 17) the second used to die with "No available agent": Ray's
    fixed dashboard-agent port 52365 was the first's. Now the lock refuses one of the pair, touching
    nothing, and the other two runs finish, each with one Ray session in its own temp dir."""
    env_a = rehearse_env(tmp_path / "a", rehearsal_world, ROUNDS=1, **NO_WANDB)
    env_b = rehearse_env(tmp_path / "b", rehearsal_world, ROUNDS=1, **NO_WANDB)
    run_a = Run(tmp_path / "a" / "runs")
    pair, other = [start(env_a), start(env_a)], start(env_b)
    codes = [p.wait(timeout=800) for p, _ in pair]
    outs = [log.read_text(errors="replace") for _, log in pair]
    assert sorted(codes) == [0, 1], "\n\n".join(o[-3000:] for o in outs)
    refused = outs[codes.index(1)]
    assert "this run is already in progress" in refused, refused[-3000:]
    final = json.loads((run_a.run_dir / "skillbank-final.json").read_text())
    assert final["skills"], outs[codes.index(0)][-3000:]  # the analyst's skills reached the bank
    assert _analyst_models(tmp_path / "a" / "runs") == {}  # and its stand-in stopped with the run
    assert other[0].wait(timeout=800) == 0, other[1].read_text(errors="replace")[-4000:]
    temps = {ray_temp_dir(env) for env in (env_a, env_b)}
    assert len(temps) == 2
    for env in (env_a, env_b):  # each run made one Ray session, in its own temp dir, and recorded it
        recorded = (Path(env["RUNS_DIR"]) / "rehearsal" / "ray" / "sessions").read_text().split()
        assert len(recorded) == 1 and (Path(ray_temp_dir(env)) / recorded[0]).is_dir()
