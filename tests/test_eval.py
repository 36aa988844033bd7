"""`pyhelpers eval val|gate` end to end: real fake ShopSimulator + fake SGLang processes on loopback,
the real CLI in subprocesses, the test tokenizer, wandb offline read back.

One module-scoped world (120 val tasks, base success 0.3, a planted helpful and harmful skill)
and one reference run (val + gate with --wandb) are shared by the tests below; the fault tests
start their own ShopSimulator so that they can kill it and count its slots.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from argparse import Namespace
from collections import Counter

import pytest
from conftest import ROOT, offline_runs, wandb_records
from fakes.procs import free_port, slots, start_fake_sglang, start_fake_shopsim, stop
from support.eval_world import (
    HARM,
    HELP,
    eval_env,
    make_world,
    outcomes,
    planted_success,
    read_episodes,
    round_dir,
)

from pyhelpers.jsonfiles import validation_errors
from pyhelpers.skills.bank import bank_sha256, empty_bank, load_bank, write_bank

pytestmark = pytest.mark.heavy  # fake ShopSimulator and SGLang servers, the CLI in subprocesses
SHOP_SEED = 1


def cli(args, env, timeout=300):
    return subprocess.run([sys.executable, "-m", "pyhelpers", *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def popen(args, env):
    return subprocess.Popen([sys.executable, "-m", "pyhelpers", *args], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def wait_lines(path, n, proc, timeout=300.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= n:
            return
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.02)
    raise AssertionError(f"{path} never reached {n} lines")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("evalworld")
    w = make_world(root / "world", n_tasks=120, base=0.3, seed=3)
    sg = start_fake_sglang(w.tokenizer, policy=w.policy)
    yield w, sg
    stop(sg)


@pytest.fixture(scope="module")
def reference(world, tmp_path_factory):
    """The undisturbed run: val then gate, both with --wandb, on a fresh simulator."""
    w, sg = world
    tmp = tmp_path_factory.mktemp("evalref")
    shop = start_fake_shopsim(w.catalog, slots=48, seed=SHOP_SEED, retries=3, delay=0.2)
    env = eval_env(tmp, w, shop.port, sg.port)
    rd = round_dir(tmp)
    rd.mkdir(parents=True)
    write_bank(rd / "compiled.json", w.bank)
    args = ["--round-dir", str(rd), "--model-dir", str(w.tokenizer), "--wandb"]
    val = cli(["eval", "val", *args], env)
    gate = cli(["eval", "gate", *args], env)
    yield {"tmp": tmp, "env": env, "rd": rd, "args": args, "val": val, "gate": gate, "shop": shop}
    stop(shop)


def test_gate_accepts_helpful_rejects_harmful_and_val_reports_base_rate(world, reference):
    w, _ = world
    val, gate, rd = reference["val"], reference["gate"], reference["rd"]
    assert val.returncode == 0, val.stdout + val.stderr
    assert gate.returncode == 0, gate.stdout + gate.stderr

    summ = json.loads((rd / "val" / "summary.json").read_text())
    assert summ["episodes"] == 120 and summ["n"] == 120 and summ["infra_errors"] == 0
    s = summ["success"]
    assert s["method"] == "wilson" and s["ci_low"] <= w.base <= s["ci_high"], s
    assert s["ci_high"] - s["ci_low"] < 0.2
    assert {tid: v["success"] for tid, v in summ["per_task"].items()} == \
        {t["task_id"]: planted_success(w, t) for t in w.tasks}  # each task's planted outcome, exactly
    assert sum(summ["terminations"].values()) == 120 and "wall" not in json.dumps(summ)
    assert "Wilson" in val.stdout

    doc = json.loads((rd / "gate" / "decisions.json").read_text())
    assert validation_errors(doc, "gate_decisions") == []
    assert doc["bank_sha256"] == bank_sha256(load_bank(rd / "compiled.json")) and doc["round"] == 0
    assert doc["decisions"][HELP]["decision"] == "accept", doc
    assert doc["decisions"][HARM]["decision"] == "reject", doc
    gs = json.loads((rd / "gate" / "summary.json").read_text())
    plan = json.loads((rd / "gate" / "plan.json").read_text())
    assert gs["episodes"]["pairs_used"] == 96 and gs["infra"]["infra_errors"] == 0
    assert gs["plan_fingerprint"] == plan["fingerprint"]
    assert "MDE (80% power)" in gate.stdout and "accept" in gate.stdout

    eps = read_episodes(rd / "gate" / "episodes.jsonl")
    assert sorted(e["id"] for e in eps) == sorted(e["id"] for e in plan["episodes"])
    planned = {e["id"]: e for e in plan["episodes"]}
    for e in eps:  # every episode showed exactly its mask (no background here), within budget
        assert e["shown"] == sorted(planned[e["id"]]["show"]) and e["dropped"] == []
    assert slots(reference["shop"])["taken"] == []
    assert (rd / "gate" / "slots.jsonl").read_text() == ""


def test_wandb_logs_val_and_gate_once_across_resume(reference):
    env, rd, args = reference["env"], reference["rd"], reference["args"]
    before = {p: (rd / p).read_bytes() for p in ("val/summary.json", "gate/summary.json", "gate/decisions.json")}
    for cmd in ("val", "gate"):
        again = cli(["eval", cmd, *args, "--resume"], env)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "already logged, nothing sent" in again.stdout
    for p, data in before.items():  # nothing replayed, byte-identical outputs
        assert (rd / p).read_bytes() == data, p
    run_dir = reference["tmp"] / "runs" / "evaltest"
    for rid, job in (("evalgrp-val-r0", "val"), ("evalgrp-gate-r0", "gate")):
        dirs = offline_runs(run_dir, rid)
        assert len(dirs) == 1, dirs
        recs = wandb_records(dirs[0])
        run = next(r["run"] for r in recs if r["type"] == "run")
        assert run["job_type"] == job and run["run_group"] == "evalgrp" and run["run_id"] == rid
        hist = [r["history"]["item"] for r in recs if r["type"] == "history"]
        if job == "val":
            assert len(hist) == 1
            val = json.loads((rd / "val" / "summary.json").read_text())
            assert hist[0]["val/success_rate"] == pytest.approx(val["success"]["rate"])
            assert hist[0]["val/n"] == 120 and hist[0]["val/infra_errors"] == 0
        else:
            assert any(f"gate/skill/{HELP}/estimate" in h for h in hist)


def test_no_skills_to_gate_writes_empty_decisions(world, reference, tmp_path):
    rd = round_dir(tmp_path, 1)
    (rd / "val").mkdir(parents=True)
    shutil.copy(reference["rd"] / "val" / "summary.json", rd / "val" / "summary.json")
    write_bank(rd / "compiled.json", empty_bank(1))
    res = cli(["eval", "gate", "--round-dir", str(rd)], reference["env"])
    assert res.returncode == 0, res.stdout + res.stderr
    assert "no skills to test" in res.stdout
    doc = json.loads((rd / "gate" / "decisions.json").read_text())
    assert doc["decisions"] == {} and doc["round"] == 1 and validation_errors(doc, "gate_decisions") == []
    assert json.loads((rd / "gate" / "summary.json").read_text())["episodes"]["planned"] == 0


def test_sigkill_then_resume_plays_every_episode_once_and_frees_all_slots(world, reference, tmp_path):
    w, sg = world
    shop = start_fake_shopsim(w.catalog, slots=48, seed=SHOP_SEED, retries=3, delay=0.2)
    try:
        env = eval_env(tmp_path, w, shop.port, sg.port)
        rd = round_dir(tmp_path)
        args = ["eval", "val", "--round-dir", str(rd), "--model-dir", str(w.tokenizer)]
        proc = popen(args, env)
        eps_path = rd / "val" / "episodes.jsonl"
        wait_lines(eps_path, 10, proc)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert proc.returncode == -signal.SIGKILL
        done_before = len(read_episodes(eps_path))
        assert done_before < 120
        assert slots(shop)["taken"], "the killed run should have left slots taken"
        with open(eps_path, "ab") as fh:  # a torn last line, as a kill mid-write leaves it
            fh.write(b'{"id": "val-v00')
        refused = cli(args, env)
        assert refused.returncode == 1 and "--resume" in refused.stderr
        res = cli([*args, "--resume"], env)
        assert res.returncode == 0, res.stdout + res.stderr
        recs = read_episodes(eps_path)
        counts = Counter(r["id"] for r in recs)
        assert set(counts) == {f"val-{t['task_id']}" for t in w.tasks} and set(counts.values()) == {1}
        assert slots(shop)["taken"] == []
        timing = json.loads((rd / "val" / "timing.json").read_text())
        assert timing["resumed"] == done_before and timing["played"] == 120 - done_before
        assert timing["slot_cleanup"]["start"]["released"] or timing["slot_cleanup"]["start"]["release_all"]
        ref = outcomes(read_episodes(reference["rd"] / "val" / "episodes.jsonl"))
        assert outcomes(recs) == ref  # the same episodes as the uninterrupted run
    finally:
        stop(shop)


def test_shopsim_restart_mid_run_is_retried_and_does_not_bias_success(world, reference, tmp_path):
    w, sg = world
    port = free_port()
    shop = start_fake_shopsim(w.catalog, slots=48, seed=SHOP_SEED, retries=3, delay=0.2, port=port)
    try:
        env = eval_env(tmp_path, w, port, sg.port)
        rd = round_dir(tmp_path)
        proc = popen(["eval", "val", "--round-dir", str(rd), "--model-dir", str(w.tokenizer)], env)
        wait_lines(rd / "val" / "episodes.jsonl", 15, proc)
        stop(shop)  # kill the simulator's process group ...
        shop = start_fake_shopsim(w.catalog, slots=48, seed=SHOP_SEED, retries=3, delay=0.2, port=port)  # ... and restart
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out
        summ = json.loads((rd / "val" / "summary.json").read_text())
        assert summ["infra_errors"] == 0 and summ["retried"] > 0, summ
        recs = read_episodes(rd / "val" / "episodes.jsonl")
        assert any(r["attempts"] > 1 for r in recs)
        ref_recs = read_episodes(reference["rd"] / "val" / "episodes.jsonl")
        assert outcomes(recs) == outcomes(ref_recs)  # same per-episode outcomes: no bias from the restart
        ref = json.loads((reference["rd"] / "val" / "summary.json").read_text())
        assert summ["success"] == ref["success"] and summ["per_task"] == ref["per_task"]
        assert slots(shop)["taken"] == []
    finally:
        stop(shop)


def _slime_train_stub():
    """The stand-in slime's train.py (its eval_log is slime's logging of an evaluation)."""
    import importlib.util

    from conftest import FAKES
    from support.rollout_stack import use_slime_stub

    use_slime_stub()
    spec = importlib.util.spec_from_file_location("fake_slime_train_for_in_job_eval", FAKES / "slime_stub" / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _plugin_args(env: dict, w, router_port: int, **knobs):
    """slime's args inside its RolloutManager as the driver's slime.yaml sets them (plugin_values of the
    run's own Config, round 0), with the router's address slime adds."""
    from pyhelpers.config import load
    from pyhelpers.rollout import settings
    from pyhelpers.run.layout import from_config

    cfg = load.load({**env, **{k: str(v) for k, v in knobs.items()}})
    values = {**settings.plugin_values(cfg, from_config(cfg), 0), "tokenizer_path": str(w.tokenizer)}
    return cfg, Namespace(**{settings.PREFIX + k: v for k, v in settings.from_mapping(values).__dict__.items()},
                          sglang_router_ip="127.0.0.1", sglang_router_port=router_port,
                          hf_checkpoint=str(w.tokenizer), rollout_batch_size=1, n_samples_per_prompt=1,
                          global_batch_size=1, wandb_always_use_train_step=False)


def test_the_in_job_eval_hook_writes_the_evaluate_stages_val_and_gate_and_hands_slime_its_rewards(world, reference,
                                                                                                    tmp_path):
    """The one-job mode's eval function (rollout/in_job_eval.py), called as slime's RolloutManager calls
    it after round 1's last rollout (STEPS_PER_ROUND=2: rollout 3), plays round 1's bare val on the
    job's engines (a stand-in engine as slime's are started, drawing each training episode on its
    own: --fake-sampling episode; the CLI played on the eval server's) into round-001/val/, then the gate
    of the round's compiled.json into round-001/gate/: the same episodes, summaries and decisions as
    `pyhelpers eval val` and `eval gate`; slime logs the scored episodes' mean reward and the gate's
    decisions. A rollout that ends no round is refused, naming --eval-interval; a round whose compiled
    bank does not come within ANALYST_DRAIN_TIMEOUT after its val fails naming it, its val kept."""
    from pyhelpers.errors import ToolkitError
    from pyhelpers.rollout import in_job_eval

    w, sg = world
    shop = start_fake_shopsim(w.catalog, slots=48, seed=SHOP_SEED, retries=3, delay=0.2)
    engine = start_fake_sglang(w.tokenizer, policy=w.policy, args=["--fake-sampling", "episode"])
    try:
        env = eval_env(tmp_path, w, shop.port, sg.port)
        train = _slime_train_stub()
        cfg, args = _plugin_args(env, w, engine.port, STEPS_PER_ROUND=2, REWARD="strict")
        with pytest.raises(ToolkitError) as err:
            in_job_eval.evaluate(args, 2, data_source=None, evaluation=True)
        assert "after rollout 2, which ends no round (STEPS_PER_ROUND=2)" in err.value.what
        assert err.value.where == "--eval-interval" and "--skip-eval-before-train" in err.value.fix
        round_dir(tmp_path, 1).mkdir(parents=True)
        write_bank(round_dir(tmp_path, 1) / "compiled.json", w.bank)  # what compile wrote on the driver
        out = in_job_eval.evaluate(args, 3, data_source=None, evaluation=True)
        logged = train.eval_log(3, args, out.data, out.metrics)
        assert slots(shop)["taken"] == []
        _, late = _plugin_args(env, w, engine.port, STEPS_PER_ROUND=2, ANALYST_DRAIN_TIMEOUT=0.5)
        with pytest.raises(ToolkitError) as err:  # round 2: no compiled.json comes
            in_job_eval.evaluate(late, 5, data_source=None, evaluation=True)
    finally:
        stop(engine)
        stop(shop)
    assert "no compiled bank 0.5 s (ANALYST_DRAIN_TIMEOUT) after the round's val" in err.value.what
    assert (round_dir(tmp_path, 2) / "val" / "summary.json").is_file()
    mine, theirs = round_dir(tmp_path, 1) / "val", reference["rd"] / "val"
    assert outcomes(read_episodes(mine / "episodes.jsonl")) == outcomes(read_episodes(theirs / "episodes.jsonl"))
    got, want = (json.loads((d / "summary.json").read_text()) for d in (mine, theirs))
    assert (got.pop("label"), got.pop("round")) == ("round-001", 1)
    want.pop("label"), want.pop("round")
    assert got == want
    played = {r["id"]: r for r in read_episodes(mine / "episodes.jsonl")}
    scored = [played[f"val-{t['task_id']}"] for t in w.tasks if played[f"val-{t['task_id']}"]["termination"] != "infra_error"]
    assert out.data == {"shopsim_val": {"rewards": [float(r["strict"]) for r in scored]}}  # in the val tasks' order
    assert logged["eval/shopsim_val"] == pytest.approx(sum(r["strict"] for r in scored) / len(scored))
    assert logged["eval/shopsim_val/success"] == got["success"]["rate"] and logged["eval/step"] == 3
    mine, theirs = round_dir(tmp_path, 1) / "gate", reference["rd"] / "gate"
    assert outcomes(read_episodes(mine / "episodes.jsonl")) == outcomes(read_episodes(theirs / "episodes.jsonl"))
    for name in ("decisions.json", "summary.json"):
        assert json.loads((mine / name).read_text()) == json.loads((theirs / name).read_text()), name
    decided = json.loads((mine / "decisions.json").read_text())["decisions"]
    assert logged["eval/shopsim_gate/tested"] == len(decided) == 2
    from pyhelpers.run import events

    played = [(e["what"], e["round"], e["played"]) for e in events.read(round_dir(tmp_path, 1).parent.parent)
              if e["kind"] == "episodes"]
    gate_episodes = len(read_episodes(mine / "episodes.jsonl"))
    # (the gate's event names its bank's round, as the evaluate stage's does: here the reference's bank, round 0)
    assert played == [("val", 1, len(w.tasks)), ("gate", w.bank["round"], gate_episodes), ("val", 2, len(w.tasks))], played
    assert sum(v for k, v in logged.items() if k.startswith("eval/shopsim_gate/") and k != "eval/shopsim_gate/tested") == 2


def test_context_budget_ends_episodes_without_an_infra_error(world, reference, tmp_path):
    w, sg = world
    tasks = tmp_path / "val12.jsonl"
    tasks.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in w.tasks[:12]), encoding="utf-8")
    env = eval_env(tmp_path, w, reference["shop"].port, sg.port, ROLLOUT_MAX_CONTEXT_LEN=2600,
                   ROLLOUT_MAX_RESPONSE_LEN=128)
    out = tmp_path / "short"
    res = cli(["eval", "val", "--out-dir", str(out), "--tasks", str(tasks), "--model-dir", str(w.tokenizer),
               "--quiet"], env)
    assert res.returncode == 0, res.stdout + res.stderr
    summ = json.loads((out / "summary.json").read_text())
    assert summ["label"] == "baseline" and summ["round"] is None and summ["infra_errors"] == 0
    assert summ["terminations"]["context_budget"] >= 1 and summ["n"] == 12, summ["terminations"]
    assert summ["settings"]["max_context_len"] == 2600


# ---- tasks and slots that cannot drift (issue 17 §4) ----------------------------------------------

def _val_file(path, tasks):
    path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks), encoding="utf-8")
    return path


def test_a_bad_task_index_stops_val_naming_the_task_and_leaves_no_slot_taken(world, tmp_path):
    """pack_api pops a slot, then the reset fails 'list index out of range': a task error (not
    retried as infra), named with its id and index; the stage's clean-up frees the popped slot."""
    w, sg = world
    shop = start_fake_shopsim(w.catalog, slots=8, seed=SHOP_SEED, retries=3, delay=0.2)
    try:
        bad = {"task_id": "vbad", "shopsim_idx": 9999, "split": "val", "instruction": "不存在的任务"}
        tasks = _val_file(tmp_path / "val.jsonl", [*w.tasks[:6], bad])
        env = eval_env(tmp_path, w, shop.port, sg.port, SHOPSIM_SLOTS=8, EVAL_CONCURRENCY=4)
        res = cli(["eval", "val", "--out-dir", str(tmp_path / "out"), "--tasks", str(tasks),
                   "--model-dir", str(w.tokenizer), "--quiet"], env)
        assert res.returncode == 1, res.stdout + res.stderr
        assert "vbad" in res.stderr and "9999" in res.stderr and "--server-file" in res.stderr, res.stderr
        assert "Traceback" not in res.stderr
        view = slots(shop)
        # twice: the client's second reset tells a bad task from a popped slot beyond the pool
        # (ShopSimClient.reset); after that a task error is never retried as infra
        assert view["counts"]["reset_error"] == 2, view
        assert view["taken"] == [], view
    finally:
        stop(shop)


def test_a_shifted_task_file_stops_val_naming_both_instructions(world, tmp_path):
    w, sg = world
    shifted = [{**t, "shopsim_idx": t["shopsim_idx"] + 1} for t in w.tasks[:6]]
    tasks = _val_file(tmp_path / "val.jsonl", shifted)
    shop = start_fake_shopsim(w.catalog, slots=8, seed=SHOP_SEED, retries=3, delay=0.2)
    try:
        env = eval_env(tmp_path, w, shop.port, sg.port, SHOPSIM_SLOTS=8, EVAL_CONCURRENCY=4)
        res = cli(["eval", "val", "--out-dir", str(tmp_path / "out"), "--tasks", str(tasks),
                   "--model-dir", str(w.tokenizer), "--quiet"], env)
        assert res.returncode == 1, res.stdout + res.stderr
        err = res.stderr
        hit = next(t for t in shifted if t["task_id"] in err)
        server_side = next(t for t in w.tasks if t["shopsim_idx"] == hit["shopsim_idx"])
        assert hit["instruction"] in err and server_side["instruction"] in err, err
        assert str(hit["shopsim_idx"]) in err and "pyhelpers data build --server-file" in err, err
        assert not (tmp_path / "out" / "summary.json").exists()
        assert slots(shop)["taken"] == []
    finally:
        stop(shop)


def test_a_reset_failing_after_the_pop_is_retried_and_its_slot_freed_at_the_end(world, tmp_path):
    """Any other reset failure (here an exception inside the server's env.reset) took a slot whose
    number is unknown: recorded as such, retried as infra, and the end-of-run clean-up frees it
    (timing.json records that clean-up as well as the one at the start)."""
    w, sg = world
    tasks = _val_file(tmp_path / "val.jsonl", w.tasks[:12])
    shop = start_fake_shopsim(w.catalog, slots=8, seed=SHOP_SEED, retries=3, delay=0.2,
                              args=["--fail-reset-once", f"{w.tasks[2]['shopsim_idx']},{w.tasks[5]['shopsim_idx']}"])
    try:
        env = eval_env(tmp_path, w, shop.port, sg.port, SHOPSIM_SLOTS=8, EVAL_CONCURRENCY=4)
        out = tmp_path / "out"
        res = cli(["eval", "val", "--out-dir", str(out), "--tasks", str(tasks), "--model-dir", str(w.tokenizer),
                   "--quiet"], env)
        assert res.returncode == 0, res.stdout + res.stderr
        summ = json.loads((out / "summary.json").read_text())
        assert summ["infra_errors"] == 0 and summ["retried"] == 2, summ
        assert slots(shop)["taken"] == [] and slots(shop)["counts"]["reset_error"] == 2
        timing = json.loads((out / "timing.json").read_text())
        assert timing["slot_cleanup"]["end"]["release_all"] is True, timing
        assert timing["slot_cleanup"]["start"] == {"released": [], "release_all": False}, timing
    finally:
        stop(shop)


def test_val_against_a_server_that_is_not_shopsimulator_says_so(world, tmp_path):
    from fakes.other_http import other_http_server

    w, sg = world
    tasks = _val_file(tmp_path / "val.jsonl", w.tasks[:2])
    with other_http_server() as url:
        env = eval_env(tmp_path, w, free_port(), sg.port)
        res = cli(["eval", "val", "--out-dir", str(tmp_path / "out"), "--tasks", str(tasks), "--shopsim", url,
                   "--model-dir", str(w.tokenizer), "--quiet"], env)
    assert res.returncode == 1 and "not ShopSimulator" in res.stderr and "Traceback" not in res.stderr, res.stderr


def test_val_against_shopsimulator_answering_an_error_page_names_it(world, tmp_path):
    """Issue 40 item 15: ShopSimulator's own Flask answering its 500 page (pack_api raised outside
    its try) is ShopSimulator answering with an error: `eval val` stops at once and says so, with
    the fix that fits (its log), not "another program answers there"."""
    from fakes.fake_shopsim import flask_error
    from fakes.other_http import answering_server

    w, sg = world
    tasks = _val_file(tmp_path / "val.jsonl", w.tasks[:2])
    status, page, content_type = flask_error(500)
    with answering_server(status, page.decode(), content_type) as url:
        env = eval_env(tmp_path, w, free_port(), sg.port)
        res = cli(["eval", "val", "--out-dir", str(tmp_path / "out"), "--tasks", str(tasks), "--shopsim", url,
                   "--model-dir", str(w.tokenizer), "--quiet"], env)
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert "HTTP 500" in res.stderr and "ShopSimulator answered" in res.stderr and "shopsim.log" in res.stderr, res.stderr
    assert "not ShopSimulator" not in res.stderr and "another program" not in res.stderr, res.stderr
