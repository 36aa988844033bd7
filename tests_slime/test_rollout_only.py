"""slime's real train.py in rollout-only mode drives the plugin (issue 42): the lane's job
(tests_slime/rollout_job.py: the plan's own train.py argv plus only what rollout-only mode needs,
two rollouts, then a resume with --start-rollout-id) runs once; each test reads back one thing it
wrote. The test-only shims (tests_slime/shims/sitecustomize.py) are listed in tests/fakes/README.md."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from rollout_job import ENGINES, FIRST, Job

from pyhelpers.rollout import flags as plugin
from pyhelpers.run import checkpoints, events


def test_slimes_train_py_runs_two_rollouts_of_the_plugin(job: Job):
    assert job.first.rc == 0, f"slime's train.py exited {job.first.rc}:\n{job.first.log[-6000:]}"
    assert "import pyhelpers.rollout.rollout.generate_rollout as generate_rollout function" in job.first.log
    assert job.resumed.rc == 0, f"the resumed train.py exited {job.resumed.rc}:\n{job.resumed.log[-6000:]}"


def _metrics(lay, r: int) -> list[dict]:
    return [json.loads(line) for line in lay.rollout_metrics(r).read_text().splitlines()]


def test_the_plugin_wrote_its_records_as_in_a_real_run(job: Job):
    """Each round's records in its own directory: the job goes on past round 0 (STEPS_PER_ROUND=2), as
    the one-job mode's does, so rollouts 2 and 3 are round 1's (settings.for_rollout)."""
    lay = job.lay
    assert job.first.rc == 0 and job.resumed.rc == 0 and job.evaluated.rc == 0
    spool = sorted(p.name for p in lay.spool(0).rglob("*") if p.is_file())
    assert spool, f"no spool records under {lay.spool(0)}"
    steps = job.cfg.STEPS_PER_ROUND
    for r in (0, 1):
        metrics = _metrics(lay, r)
        assert [m["rollout_id"] for m in metrics] == list(range(r * steps, (r + 1) * steps)), (r, metrics)
        assert all(m["round"] == r and m["metrics"]["rollout/shopsim/episodes"] > 0 for m in metrics), metrics
    states = sorted(p.name for p in (Path(job.cfg.TRAIN_SAVE)).rglob("shopsimrl_data_state_*.json"))
    assert states == [f"shopsimrl_data_state_{i}.json" for i in range(job.rollouts)], states


def _wandb_history(run_dir: Path) -> list[dict]:
    """History items of the job's offline W&B runs, read with W&B's own reader."""
    items = []
    for d in sorted((run_dir / "wandb" / "wandb").glob("offline-run-*")):
        out = subprocess.run([str(Path(sys.executable).with_name("wandb")), "leet", "inspect", "--json", str(d)],
                             capture_output=True, text=True, timeout=300, check=True).stdout
        recs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        items += [r["history"]["item"] for r in recs if r["type"] == "history"]
    return items


def test_slime_logged_the_plugins_metrics_to_wandb(job: Job):
    lay = job.lay
    assert job.first.rc == 0 and job.resumed.rc == 0 and job.evaluated.rc == 0
    logged = {int(i["rollout/step"]): i["rollout/shopsim/success_rate"] for i in _wandb_history(lay.run_dir)
              if "rollout/shopsim/success_rate" in i}
    written = {m["rollout_id"]: m["metrics"]["rollout/shopsim/success_rate"] for r in (0, 1) for m in _metrics(lay, r)}
    assert logged == written and len(logged) == job.rollouts


def test_slimes_train_py_calls_the_in_job_eval_hook_after_a_rounds_last_rollout(job: Job):
    """Issue 44: with the one-job mode's eval flags (rollout.flags.in_job_eval_flags), slime's train.py calls
    the toolkit's eval function after rollout 3, round 1's last (train.py:90-91, should_run_periodic_action),
    through RolloutManager.eval (ray/rollout.py:513-526): round 1's bare val is played on the job's
    engines into rounds/round-001/val/ as the evaluate stage writes it, and slime logs the rewards it
    returned (rollout_metrics.py:223-253), in its log and in W&B on eval/step. Then, round 1's
    compiled.json there, the gate of its one candidate skill, its decisions logged beside."""
    from pyhelpers.tasks.files import load_tasks

    ev = job.evaluated
    assert ev is not None and ev.rc == 0, f"the evaluating train.py exited {ev and ev.rc}:\n{ev and ev.log[-6000:]}"
    assert f"import {plugin.EVAL_FUNCTION} as eval_generate_rollout function" in ev.log, ev.log[-3000:]
    summary = json.loads((job.lay.val_dir(1) / "summary.json").read_text())
    tasks = load_tasks(job.cfg.VAL_TASKS, split="val")
    assert (summary["label"], summary["round"], summary["episodes"]) == ("round-001", 1, len(tasks)), summary
    said = re.findall(r"eval (\d+): \{.*'eval/shopsim_val': ([\d.]+)", ev.log)
    assert [int(r) for r, _ in said] == [FIRST + 1], said  # once, after rollout 3 only
    logged = [i for i in _wandb_history(job.lay.run_dir) if "eval/shopsim_val" in i]
    assert len(logged) == 1 and int(logged[0]["eval/step"]) == FIRST + 1, logged
    assert logged[0]["eval/shopsim_val/success"] == summary["success"]["rate"], logged
    assert float(said[0][1]) == logged[0]["eval/shopsim_val"]
    decided = json.loads((job.lay.round_dir(1) / "gate" / "decisions.json").read_text())["decisions"]
    assert len(decided) == 1 and logged[0]["eval/shopsim_gate/tested"] == 1, (decided, logged)


def test_no_404_or_retry_storm_in_the_logs(job: Job):
    """slime's control calls (server_info, abort, loads, flush) each found their endpoint on the
    stand-in engines: a 404 or slime's abort retries (server_control.py:32-52) would show here."""
    assert job.first.rc == 0 and job.resumed.rc == 0 and job.evaluated.rc == 0
    log = job.first.log + job.resumed.log + job.evaluated.log
    for name, text in [("train.log", log), *((e.url, e.stderr()) for e in job.engines)]:
        assert not re.search(r"\b404\b", text), f"{name}: a 404"
    # slime asks each engine once per rollout; a missing endpoint makes it try again and again
    # (server_control.py:43-60: "Failed to abort ...", "Failed to get SGLang server load ...").
    assert not re.findall(r"Failed to (abort SGLang server|get SGLang server load).*", log)
    # One abort an engine a rollout, plus one more each time an engine still counted a request right
    # after it (server_control.py:43-63 logs "still has N requests after abort attempt K" and asks
    # again): a request of the step still finishing as the abort lands, which real SGLang's
    # asynchronous abort shows too. Those are bounded as well: a storm would repeat them.
    retries = re.findall(r"SGLang server \S+ still has \d+ requests after abort attempt \d+", log)
    assert len(retries) <= ENGINES * job.rollouts, retries
    assert len(re.findall(r"Abort request for SGLang server", log)) <= ENGINES * job.rollouts + len(retries)


def test_a_resumed_train_py_continues_the_data_where_the_first_stopped(job: Job):
    """The second invocation (`--start-rollout-id FIRST`, rollout_job.py) draws on from the first
    one's last position: slime loads global_dataset_state_dict_<FIRST-1>.pt from --load
    (ray/placement_group.py:221-222, rollout/data_source.py:138-160), and every group slime hands
    the plugin then carries a group index past the ones the first run drew
    (data_source.py:108-117 numbers groups on from sample_group_index). A run that started the
    data again would number its groups from 0 and play the first tasks again. Its first rollout, in
    a round past the job's YAML (the one-job mode's case), waited for round 1's bank inside slime's
    actor until it was written (rollout/bank_wait.py's events)."""
    from slime.observability.rollout_data_utils import load_debug_rollout_data

    assert job.first.rc == 0 and job.resumed.rc == 0, job.resumed.log[-6000:]
    before = json.loads(checkpoints.plugin_record_path(job.lay.megatron, FIRST - 1).read_text())
    after = json.loads(checkpoints.plugin_record_path(job.lay.megatron, FIRST).read_text())
    resumed = load_debug_rollout_data(job.debug, rollout_id=FIRST)
    first = {s.group_index for i in range(FIRST) for s in load_debug_rollout_data(job.debug, rollout_id=i)}
    indices = sorted({s.group_index for s in resumed})
    assert indices and indices[0] >= before["sample_group_index"] > max(first), (
        f"the resumed step's groups {indices} do not follow the first run's (last position {before}, "
        f"its groups {sorted(first)})")
    loaded = f"load metadata from {checkpoints.rollout_state_path(job.lay.megatron, FIRST - 1)}"
    assert loaded in job.resumed.log, f"no {loaded!r} in the resumed train.py's log"
    waits = [(e["kind"], e["round"]) for e in events.read(job.lay.run_dir) if e["kind"] in ("bank-wait", "bank-in")]
    assert waits == [("bank-wait", 1), ("bank-in", 1)], "round 1's first rollout did not wait for its bank"
    drawn = _metrics(job.lay, 1)[0]  # rollout FIRST, round 1's first (STEPS_PER_ROUND=FIRST)
    assert drawn["rollout_id"] == FIRST
    assert after["sample_group_index"] == before["sample_group_index"] + drawn["metrics"]["rollout/shopsim/groups_drawn"]
