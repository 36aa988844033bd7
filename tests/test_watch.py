"""Watching a run (issue 20): progress and ETA on a terminal (tmux) and a rehearsal's terminal
without third-party noise (`make watch` on a live run: tests/test_run_control.py, beside the
second start, on one held rehearsal). What `make status` and the report say after the driver is
killed is checked at the first kill of the fault matrix (tests/test_faults.py)."""

from __future__ import annotations

import re
import subprocess
import time

from conftest import ROOT
from support.rehearsal import (
    Run,
    in_rehearsal,
    rehearse_env,
)

# Dynamic sampling's kept/drawn groups stand between the episodes and the success rate.
STEP_LINE = (r"^\d\d:\d\d:\d\d driver +round {r} \({n} of 2\) train: step {k}/2 done: \d+ episodes, "
             r"groups kept \d+ of \d+( \([^)]*\))?, success [\d.]+%, step \d+:\d\d; ETA round \d+:\d\d, run \d+:\d\d")


def test_a_rehearsal_on_a_terminal_shows_each_step_with_its_eta_and_only_the_toolkit_s_own_lines(
        tmp_path, rehearsal_world, hook):
    """What a user's terminal shows: each step with its ETA, evaluate's episodes, and nothing else --
    library banners and warnings (transformers, W&B, Ray) go to the logs; every line is the toolkit's,
    in one format: time, service, message. A rehearsal posts nothing to the user's webhook (not asked:
    no REHEARSAL_NOTIFY=1), and `make doctor PROFILE=rehearse` gives its preflight's verdict."""
    from support.tmux import Pane

    env = rehearse_env(tmp_path, rehearsal_world, dotenv={"NOTIFY_WEBHOOK": hook.url}, FAKE_SLIME_STEP_DELAY="2")
    pane = Pane(tmp_path, "bin/rehearse; echo REHEARSE-EXIT=$?; sleep 600", env)
    try:
        # Between steps, an updating line on the terminal: the step in progress and the ETA so far.
        pane.wait_for(r"round 0 \(1 of 2\) train: step 2/2; ETA round \d+:\d\d, run \d+:\d\d( \([^)]*\))?; "
                      r"this step \d+:\d\d of ~\d+:\d\d", screen=True, unless="REHEARSE-EXIT=")
        pane.wait_for("REHEARSE-EXIT=", timeout=400)
        text = pane.text()
        assert "REHEARSE-EXIT=0" in text, text[-4000:]
        for r, n in ((0, 1), (1, 2)):
            for k in (1, 2):
                assert re.search(STEP_LINE.format(r=r, n=n, k=k), text, flags=re.M), text[-4000:]
        # Round 0 cannot know evaluate's time yet, nor what follows its last step and the last
        # round, and says so; round 1 uses round 0's (round 0's W&B logging and report run in the
        # background meanwhile: named until they are done).
        assert re.search(STEP_LINE.format(r=0, n=1, k=1) + r" \(\+ checkpoint, export, evaluate, W&B, report: "
                         r"not timed yet\)", text, flags=re.M)
        assert re.search(STEP_LINE.format(r=1, n=2, k=1) + r"( \(\+ (W&B, report|W&B|report): not timed yet\))?$",
                         text, flags=re.M)
        # Evaluate's episodes: done/total, rate, ETA (the updating line, kept when it is done).
        assert re.search(r"driver +round-001: 24/24 episodes, success [\d.]+%, [\d.]+ ep/s, elapsed \d+:\d\d, ETA",
                         text, flags=re.M)
        # The driver's log has one line per step, none of the terminal's updating lines.
        driver_log = (Run(tmp_path / "runs").run_dir / "logs" / "driver.log").read_text()
        assert len(re.findall(r"train: step \d/2 done", driver_log)) == 4
        assert not re.search(r"train: step \d/2; ETA .*; this step", driver_log)
        assert "\r" not in driver_log
        shown = text[:text.index("REHEARSE-EXIT=")]
        lines = [line for line in shown.splitlines() if line.strip()]
        foreign = [line for line in lines if not re.match(r"^\d\d:\d\d:\d\d [a-z-]+( +\S|\s*$)", line)]
        assert not foreign, "\n".join(foreign[:20])
        for noise in ("PyTorch was not found", "wandb: ", " INFO ", "Warning"):
            assert noise not in shown
    finally:
        pane.close()
    # W&B's banners are kept, in the log of the process that logs to W&B (the driver holds no
    # W&B key: its W&B logging runs in `run log-wandb`, architecture §3).
    wandb_log = (Run(tmp_path / "runs").run_dir / "logs" / "wandb-log.log").read_text()
    assert "wandb: " in wandb_log
    assert hook.posts == []
    preflight = re.search(r"preflight: (doctor: .*)$", shown, flags=re.M).group(1)
    doctor = subprocess.run(["make", "doctor", "PROFILE=rehearse"], env=env, cwd=ROOT, text=True,
                            capture_output=True, timeout=300)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert doctor.stdout.strip().splitlines()[-1] == preflight


def test_make_plan_lists_every_configuration_error_first_then_the_plan_and_refuses(tmp_path, rehearsal_world):
    env = rehearse_env(tmp_path, rehearsal_world, SKILL_DUP_JACCARD="7", GATE_PAIRS="-3")
    plan = in_rehearsal(env, "bin/plan")
    assert plan.returncode == 1
    out = plan.stdout
    assert out.startswith("configuration: 2 error(s)"), out
    assert "resume point: " in out and out.index("SKILL_DUP_JACCARD=") < out.index("resume point: "), out
    assert "GATE_PAIRS" in out.split("resume point")[0]
    assert "listed first above: the run is refused" in plan.stderr


def test_make_logs_lists_sizes_and_ages_and_follows_with_a_line_count(toolkit_env, tmp_path):
    import os
    import sys

    from conftest import run_pyhelpers

    logs = tmp_path / "runs" / "qwen35-4b-train-100" / "logs"
    logs.mkdir(parents=True)
    (logs / "shopsim.log").write_text("x" * 3000)
    (logs / "driver.log").write_text("".join(f"line {i}\n" for i in range(10)))
    os.utime(logs / "shopsim.log", (time.time() - 600, time.time() - 600))
    out = run_pyhelpers(["run", "logs"], toolkit_env)
    assert out.returncode == 0, out.stderr
    assert re.search(r"^  shopsim +2\.9 KiB  written 10 min ago$", out.stdout, flags=re.M), out.stdout
    assert re.search(r"^  driver +70 B  written \d+ s ago$", out.stdout, flags=re.M), out.stdout
    assert "line 9" not in out.stdout  # the list only, no tail

    follow = subprocess.Popen([sys.executable, "-m", "pyhelpers", "run", "logs", "--service", "driver", "-n", "2",
                               "--follow"], env=toolkit_env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert [follow.stdout.readline() for _ in range(2)] == ["line 8\n", "line 9\n"]
        with open(logs / "driver.log", "a") as fh:
            fh.write("line 10\n")
        assert follow.stdout.readline() == "line 10\n"  # it follows what is written next
    finally:
        follow.kill()
        follow.wait()


def test_ctrl_c_out_of_make_logs_follow_ends_without_make_s_interrupt(toolkit_env, tmp_path):
    from support.tmux import Pane

    logs = tmp_path / "runs" / "qwen35-4b-train-100" / "logs"
    logs.mkdir(parents=True)
    (logs / "driver.log").write_text("".join(f"line {i}\n" for i in range(10)))
    pane = Pane(tmp_path, "make logs SERVICE=driver LINES=2 FOLLOW=1", toolkit_env)
    try:
        pane.wait_for(r"^line 9$")
        pane.keys("C-c")
        deadline = time.monotonic() + 30
        while not pane.ended() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pane.ended(), "make logs FOLLOW=1 did not end on Ctrl-C"
        text = pane.text()
        assert "Interrupt" not in text and "make: ***" not in text and "Traceback" not in text, text
    finally:
        pane.close()
