"""Self-healing runs on the stand-ins (a lost head Ray: tests/test_fault_matrix.py): a transient crash,
read however late its log is copied, is restarted; a crash that repeats at the same step, a permanent
cause, a short disk stop the run with the reason; the disk watchdog warns; notifications reach a local webhook in each format,
and a webhook that never answers does not hold anything up."""

from __future__ import annotations

import time

import pytest
from support.rehearsal import (
    NO_WANDB,
    Run,
    event_seen,
    frozen,
    in_rehearsal,
    pyhelpers_cmd,
    rehearse,
    rehearse_env,
    running,
    start,
    stop_leftovers,
    wait_for,
)

from pyhelpers.loop import notify
from pyhelpers.loop.supervisor import PERMANENT, TRANSIENT, Supervisor, classify


def test_the_restart_rules_table():
    nccl = "torch.distributed.DistBackendError: [Rank 1] Watchdog caught collective operation timeout"
    assert classify("train", 1, 3, "slime job FAILED", f"FileNotFoundError: a harmless warning\n{nccl}").cause == "nccl"
    assert classify("train", 0, None, "not enough disk space to train: ...").kind == PERMANENT
    assert classify("train", 0, 1, "job FAILED", "ValueError: --rollout-batch-size must be").cause == "flag"
    assert classify("train", 0, 1, "job FAILED", "torch.OutOfMemoryError: CUDA out of memory").kind == TRANSIENT
    assert classify("evaluate", 0, None, "boom", "nothing we know").cause == "unknown"
    sup = Supervisor(max_restarts=3, max_per_stage=2, backoff=1.0, backoff_max=3.0)
    waits = [sup.decide(classify("train", 0, s, "x", nccl)).wait_s for s in (1, 2)]
    assert waits == [1.0, 2.0]  # exponential backoff
    assert not sup.decide(classify("train", 0, 3, "x", nccl)).restart  # MAX_RESTARTS_PER_STAGE=2
    assert sup.decide(classify("export", 0, None, "x", nccl)).wait_s == 3.0  # capped at the max
    assert "MAX_RESTARTS=3" in sup.decide(classify("evaluate", 0, None, "x", nccl)).reason


@pytest.mark.parametrize("fmt", notify.FORMATS)
def test_each_notification_format_reaches_the_webhook(fmt, hook):
    n = notify.Notifier(hook.url, fmt, "run7", timeout=5, secret="s3cret" if fmt in ("feishu", "dingtalk") else "")
    n.send("restart", "restart 1: train failed", round=1)
    n.close()
    assert n.sent == ["restart"]
    path, body = hook.posts[0]
    text = "ShopSimRL [run7] restart 1: train failed"
    if fmt == "generic":
        assert body["event"] == "restart" and body["text"] == text and body["round"] == 1
    elif fmt == "slack":
        assert body == {"text": text}
    elif fmt == "feishu":
        assert body["msg_type"] == "text" and body["content"] == {"text": text}
        assert body["sign"] == notify._sign("s3cret", body["timestamp"], digest_of_key=False)
    else:
        assert body == {"msgtype": "text", "text": {"content": text}}
        assert ("timestamp=" in path and "sign=" in path) == (fmt == "dingtalk")


def test_a_webhook_that_never_answers_costs_at_most_its_timeout(hang_hook):
    # send() never waits: with a 60 s timeout, it returns while its POST is still unanswered (a
    # send that waited would have come back only with the ReadTimeout logged).
    slow: list[str] = []
    waiting = notify.Notifier(hang_hook.url, "generic", "run7", timeout=60, log=slow.append)
    waiting.send("run-start", "started")
    wait_for("the POST to reach the webhook", lambda: hang_hook.posts, timeout=30)
    assert slow == [] and waiting.sent == []
    # close() ends on the notifier's own timeout, the webhook still silent: nothing sent, said so.
    logged: list[str] = []
    n = notify.Notifier(hang_hook.url, "generic", "run7", timeout=0.5, log=logged.append)
    n.send("run-start", "started")
    n.send("run-done", "finished")
    n.close()
    assert not hang_hook.closing.is_set() and n.sent == []
    assert logged and "not sent: ReadTimeout (the run goes on)" in logged[0]


def test_a_crash_repeating_at_the_same_step_stops_the_run(tmp_path, rehearsal_world):
    env = rehearse_env(tmp_path, rehearsal_world, ROUNDS=1, RESTART_BACKOFF="0.2", FAKE_SLIME_CRASH_AT="1",
                       FAKE_SLIME_CRASH_KIND="nccl", **NO_WANDB)
    res = rehearse(env)
    assert res.returncode == 1
    assert "the run stopped: train of round 0 at step 1 failed the same way twice (nccl" in res.stdout
    run = Run(tmp_path / "runs")
    assert len(run.restarts()) == 1, run.restarts()
    assert event_seen(run, "run-failed", round=0, stage="train", cause="nccl")
    assert run.lock_holder() is None and not list((run.run_dir / "pids").glob("*.json"))


def test_a_permanent_failure_is_not_restarted(tmp_path, rehearsal_world):
    env = rehearse_env(tmp_path, rehearsal_world, ROUNDS=1, FAKE_SLIME_CRASH_AT="0", FAKE_SLIME_CRASH_KIND="flag",
                       **NO_WANDB)
    res = rehearse(env)
    assert res.returncode == 1
    assert "slime (or SGLang) rejected its arguments (flag)" in res.stdout
    run = Run(tmp_path / "runs")
    assert not run.restarts()
    assert event_seen(run, "run-failed", round=0, stage="train", cause="flag", verdict="permanent")


def test_the_disk_watch_outlives_a_free_space_read_that_fails(toolkit_env, tmp_path, monkeypatch):
    """A read of the free space caught mid-write (the test hook's file truncated, as the rehearsal
    below once did) or failing (a stale NFS handle) skips one check, noted once; the thread used to
    die of it and leave the rest of the round unwatched, the disk-low warning never given."""
    from pyhelpers.capacity import diskguard
    from pyhelpers.config import load
    from pyhelpers.run.layout import from_config
    from pyhelpers.stages import train

    free = tmp_path / "free-bytes"
    free.write_text(str(10**12))
    monkeypatch.setenv(diskguard.FREE_BYTES_OVERRIDE, f"@{free}")
    cfg = load.load(toolkit_env)
    checks = iter([lambda: free.write_text(""), lambda: free.write_text(""), lambda: free.write_text(str(5 * 10**8))])

    def stopped(_interval: float) -> bool:  # before each check: change the disk, or stop once done
        step = next(checks, None)
        if step is None:
            return True
        step()
        return False

    warned, noted = [], []
    train._disk_watch(cfg, from_config(cfg), 0, stopped, warned.append, note=noted.append)
    assert len(noted) == 1 and "could not read the free space" in noted[0], noted
    assert len(warned) == 1 and warned[0].startswith("disk low during round 0"), warned


def test_a_short_disk_is_warned_about_during_training_then_stops_the_run_before_export(tmp_path, rehearsal_world,
                                                                                        hook):
    free = tmp_path / "free-bytes"
    free.write_text(str(10**12))
    env = rehearse_env(tmp_path, rehearsal_world, dotenv={"NOTIFY_WEBHOOK": hook.url}, REHEARSAL_NOTIFY="1", ROUNDS=1,
                       DISK_WATCH_INTERVAL="0.2", FAKE_SLIME_STEP_DELAY="2", SHOPSIMRL_TEST_FREE_BYTES=f"@{free}", **NO_WANDB)
    run = Run(tmp_path / "runs")
    proc, log = start(env)
    wait_for("training", lambda: (run.round_dir(0) / "plugin.started").is_file(), proc=proc, log=log)
    free.write_text(str(5 * 10**8))  # 0.5 GB: below the 1 GB margin of the rehearsal
    assert proc.wait(timeout=300) == 1
    out = log.read_text()
    assert "WARNING: disk low during round 0" in out
    assert "the run stopped: export of round 0 failed: TRAIN_SAVE's disk is too full" in out
    assert "nothing was deleted" in out
    # Nothing lost: the round's checkpoint is complete and tracked; no export was started.
    megatron = run.save_dir / "megatron"
    assert (megatron / "latest_checkpointed_iteration.txt").read_text() == "1"
    assert (megatron / "iter_0000001" / ".metadata").is_file()
    assert not list(run.save_dir.glob("hf-*")) and not list(run.save_dir.glob(".hf-*"))
    assert not run.restarts()
    assert [b["event"] for _, b in hook.posts] == ["run-start", "disk-low", "run-failed"]
    st = in_rehearsal(env, *pyhelpers_cmd("run", "status"))
    assert "warning: " in st.stdout and "disk-low round 0" in st.stdout


@pytest.fixture(scope="module")
def crashed_once(tmp_path_factory, rehearsal_world):
    """One ROUNDS=1 rehearsal whose job's driver dies of a transient NCCL error one second into
    rollout 1, once, while the plugin plays it in slime's RolloutManager with every ShopSimulator
    slot taken (no spare for retries). The copy of the job's log (tail) is held from its start
    until 2 s after the driver saw the job fail, as a loaded machine may run it that late (the
    driver used to give it 0.2 s). The 2 s is the fault injected, not a wait for an event: the
    driver waits for the copy itself, up to train.COPY_WAIT_S. The spool records written before
    the crash are read as the crash happens. Shared by the two tests below (module-scoped, so
    untracked: stopped here)."""
    tmp = tmp_path_factory.mktemp("crashed-once")
    marker = tmp / "crashed-once"
    # Ports: rehearse_env's own block below the kernel's ephemeral range (a kernel-chosen port, as
    # free_port() returns, can be taken again by an outgoing connection before Ray binds it).
    env = rehearse_env(tmp, rehearsal_world, tracked=False, ROUNDS=1, RESTART_BACKOFF="0.2", FAKE_SLIME_CRASH_AT="1",
                       FAKE_SLIME_CRASH_AFTER_S="1", FAKE_SLIME_CRASH_ONCE=str(marker), FAKE_SLIME_CRASH_KIND="nccl",
                       FAKE_SGLANG_LATENCY_MS="250", SHOPSIM_SLOTS="16", SHOPSIM_EPISODE_CONCURRENCY="16", **NO_WANDB)
    run = Run(tmp / "runs")
    proc, log = start(env)
    try:
        copier = wait_for("the copy of the job's log to run", lambda: running(run, "slime-log", "tail"), proc=proc,
                          log=log)
        with frozen({"slime-log": copier}):
            wait_for("the driver's crash in rollout 1", marker.is_file, proc=proc, log=log, timeout=600)
            written = {p.name: p.read_bytes() for p in (run.round_dir(0) / "spool").glob("*.json")}
            wait_for("the job to fail", lambda: event_seen(run, "job-end", round=0, status="FAILED"), proc=proc,
                     log=log)
            time.sleep(2.0)
        rc = proc.wait(timeout=900)
        yield {"rc": rc, "log": log.read_text(), "run": run, "written": written}
    finally:
        stop_leftovers(env)
        proc.wait(timeout=300)


def test_a_crash_is_read_from_its_last_lines_however_late_the_log_copy_runs(crashed_once):
    """The restart rules read the job's log as copied into logs/slime-log.log, however late its copy
    runs: the crash is still read as the transient NCCL error it is, and the run restarts and
    finishes."""
    assert crashed_once["rc"] == 0, crashed_once["log"][-5000:]
    assert [(e["stage"], e["round"], e["step"], e["cause"]) for e in crashed_once["run"].restarts()] == [
        ("train", 0, 1, "nccl")]


def test_a_job_dying_mid_step_keeps_its_spool_records_and_the_replay_finds_every_slot(crashed_once):
    """slime runs the plugin inside its RolloutManager Ray actor, which Ray kills when the job's
    driver exits. Here the driver dies one second into rollout 1 while the actor is playing it
    (every ShopSimulator slot taken, no spare for retries): the spool records already written stay
    as they were, the restarted job gets every slot back, and the replayed steps write nothing twice."""
    import json

    run, written = crashed_once["run"], crashed_once["written"]
    assert crashed_once["rc"] == 0, crashed_once["log"][-5000:]
    spool = run.round_dir(0) / "spool"
    assert len(run.restarts()) == 1, run.restarts()
    assert written, "no failure was spooled before the crash"
    for name, data in written.items():
        assert (spool / name).read_bytes() == data, f"{name} was rewritten by the replay"
    assert not [p.name for p in spool.iterdir() if not p.name.endswith(".json")]  # no half-written file
    lines = [json.loads(x) for x in (run.round_dir(0) / "rollout_metrics.jsonl").read_text().splitlines()]
    replayed = [x for x in lines if x["rollout_id"] in (0, 1)][-2:]
    assert [x["rollout_id"] for x in replayed] == [0, 1]
    for x in replayed:
        assert x["metrics"]["rollout/shopsim/infra_errors"] == 0, x  # every slot was free again
    assert replayed[0]["metrics"]["rollout/shopsim/spool_written"] == 0  # step 0's records were all there
