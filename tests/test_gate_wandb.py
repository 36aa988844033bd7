"""log_gate: real wandb in offline mode, read back with `wandb leet inspect --json`'s reader."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import ROOT, offline_runs, wandb_records
from support.knobs import gate_knobs

from pyhelpers.gate.report import build_summary
from pyhelpers.gate.simulate import simulate_round
from pyhelpers.gate.wandb_log import log_gate
from pyhelpers.tracking import wandb_log, wandb_read

SECRET = "sk-test-SHOULD-NOT-LEAK-1234567890"
HELP, HARM = "sk-00000000000a", "sk-00000000000b"


@pytest.fixture
def wb_env(tmp_path, monkeypatch):
    for var in ("WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_API_KEY", SECRET)  # must reach no file
    monkeypatch.delenv("WANDB_RUN_GROUP", raising=False)
    monkeypatch.delenv("WANDB_JOB_TYPE", raising=False)
    return tmp_path


def test_log_gate_offline_read_back_once(wb_env):
    run_dir = wb_env / "runs" / "r1"
    knobs = gate_knobs(pairs=64, arm_episodes=8, seed=5)
    plan, est, doc = simulate_round({HELP: 0.4, HARM: -0.3}, knobs, seed=5, round_no=2)
    summary = build_summary(plan, est, doc, knobs)
    bank = {"active": 3, "probation": 1, "candidate": 4, "retired": 2}
    res = log_gate(summary, doc, bank, project="shopsim-test", group="grp-1", run_dir=run_dir, round=2,
                   mode="offline")
    assert res["logged"] and res["run_id"] == "grp-1-gate-r2"
    again = log_gate(summary, doc, bank, project="shopsim-test", group="grp-1", run_dir=run_dir, round=2,
                     mode="offline")
    assert not again["logged"]
    dirs = offline_runs(run_dir, "grp-1-gate-r2")
    assert len(dirs) == 1  # the second call logged nothing

    recs = wandb_records(dirs[0])
    run = next(r["run"] for r in recs if r["type"] == "run")
    assert run["run_group"] == "grp-1" and run["job_type"] == "gate" and run["run_id"] == "grp-1-gate-r2"
    assert run["display_name"] == "gate-r2" and run["project"] == "shopsim-test"
    assert run["config"]["update"]["gate_pairs"] == 64 and run["config"]["update"]["round"] == 2
    hist = [r["history"] for r in recs if r["type"] == "history"]
    assert len(hist) == 1 and hist[0]["step"]["num"] == 2
    item = hist[0]["item"]
    d = doc["decisions"]
    for sid in (HELP, HARM):
        for f in ("estimate", "ci_low", "ci_high", "se", "mde"):
            assert item[f"gate/skill/{sid}/{f}"] == pytest.approx(d[sid][f])
    assert item["gate/mde"] == pytest.approx(summary["mde"]) and item["gate/n_pairs"] == est.n_pairs
    assert item["bank/active"] == 3 and item["bank/retired"] == 2 and item["bank/total"] == 10
    assert item["gate/accept"] == summary["counts"]["accept"]
    summ = {}
    for r in recs:
        if r["type"] == "summary":
            summ.update(r["summary"].get("update", {}))
    assert summ[f"gate/skill/{HELP}/decision"] == d[HELP]["decision"]
    assert summ[f"gate/skill/{HARM}/decision"] == d[HARM]["decision"]

    marker = json.loads((run_dir / "wandb" / "logged" / "grp-1-gate-r2.json").read_text())
    assert marker["job_type"] == "gate" and marker["group"] == "grp-1"
    for f in run_dir.rglob("*"):  # no key value in any W&B file
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f

    other = log_gate(summary, doc, bank, project="shopsim-test", group="grp-1", run_dir=run_dir, round=3,
                     mode="offline")
    assert other["logged"] and len(offline_runs(run_dir, "grp-1-gate-r3")) == 1


def test_disabled_mode_logs_nothing_and_ids_are_safe(wb_env):
    assert not wandb_log.log_once(project="p", group="g", job_type="gate", run_dir=wb_env, rid="x", name="x",
                                      config={}, log=lambda run: None, mode="disabled")
    assert not (wb_env / "wandb").exists()
    rid = wandb_log.run_id("my group/with:odd?chars", "gate", "r1")
    assert rid == "my_group_with_odd_chars-gate-r1"
    long = wandb_log.run_id("g" * 100, "gate")
    assert len(long) == 64 and long == wandb_log.run_id("g" * 100, "gate")
    assert wandb_log.public_config({"WANDB_API_KEY": "x", "dashscope_api_key": "y", "alpha": 0.1}) == {"alpha": 0.1}


def test_round_gpu_idle_logged_once_per_finished_round_and_read_back(wb_env):
    """Issue 29: W&B `round/gpu_idle_s` and `round/gpu_idle_frac` per round, from events alone."""
    from test_gpu_time import one_round

    from pyhelpers import stages
    from pyhelpers.run import gpu_time
    from pyhelpers.tracking import gpu_wandb

    run_dir = wb_env / "runs" / "r1"
    evs = one_round(0, 0.0) + one_round(1, 202.5)[:5]  # round 1 still training: not logged
    rounds = gpu_time.split(evs, stages.GPU_ROLES)
    lines = gpu_wandb.log_rounds(rounds, project="shopsim-test", group="grp-1", run_dir=run_dir, mode="offline")
    assert len(lines) == 1 and "grp-1-gpu-r0" in lines[0]
    assert gpu_wandb.log_rounds(rounds, project="shopsim-test", group="grp-1", run_dir=run_dir, mode="offline") == []
    (d,) = offline_runs(run_dir, "grp-1-gpu-r0")
    recs = wandb_records(d)
    run = next(r["run"] for r in recs if r["type"] == "run")
    assert run["job_type"] == "round" and run["run_group"] == "grp-1"
    (item,) = [r["history"]["item"] for r in recs if r["type"] == "history"]
    r0 = rounds[0]
    assert item["round/gpu_idle_s"] == pytest.approx(r0.idle_s, abs=1e-3)
    assert item["round/gpu_idle_frac"] == pytest.approx(r0.idle_frac, abs=1e-4)
    assert item["round/gpu_idle/hf-export_s"] == pytest.approx(30)
    assert item["round/gpu_busy_s"] + item["round/gpu_idle_s"] == pytest.approx(item["round/wall_s"], rel=0.01)


def test_wandb_core_run_directly_prints_what_wandb_leet_inspect_prints(wb_env):
    """tracking/wandb_read runs wandb-core with the arguments `wandb leet inspect` builds, without the
    CLI's import of wandb (the report and every W&B read of the tests use it): both print the same
    records of the same run, so a wandb whose binary takes other flags fails here."""
    run_dir = wb_env / "runs" / "r1"
    knobs = gate_knobs(pairs=16, arm_episodes=4, seed=3)
    plan, est, doc = simulate_round({HELP: 0.4}, knobs, seed=3, round_no=0)
    log_gate(build_summary(plan, est, doc, knobs), doc, {"active": 1}, project="p", group="g", run_dir=run_dir,
             round=0, mode="offline")
    (offline,) = offline_runs(run_dir, "g-gate-r0")
    cli = subprocess.run([str(ROOT / ".venv" / "bin" / "wandb"), "leet", "inspect", "--json", str(offline)],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    direct = subprocess.run(wandb_read.inspect_argv(offline), capture_output=True, text=True, timeout=300,
                            check=True).stdout
    assert '"type":"history"' in direct.replace(" ", "") and direct == cli
    assert wandb_read.inspect_argv(offline.parent) is None  # not one run's dir: no single run-*.wandb
