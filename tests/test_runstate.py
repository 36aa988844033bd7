"""Stage derivation from artifacts, rotation, HF flips, resume assertions (architecture §4, §7)."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest
from fakes.megatron_layout import write_checkpoint, write_hf

from pyhelpers.errors import ToolkitError
from pyhelpers.run import checkpoints
from pyhelpers.run.layout import RunLayout
from pyhelpers.stages import export, inject, position, rotate

ROUNDS = 3


@pytest.fixture
def lay(tmp_path):
    return RunLayout(tmp_path / "runs" / "r1", tmp_path / "save" / "r1", steps_per_round=4)


def finish_round(lay: RunLayout, r: int, rounds: int = ROUNDS):
    """Put every artifact of a finished round on disk (as the stages would)."""
    it = lay.last_iteration(r)
    write_checkpoint(lay.megatron, it)
    checkpoints.rotate(lay.megatron)
    write_hf(lay.hf_dir(it), it)
    checkpoints.flip_hf(lay.hf_link, lay.hf_dir(it))
    for p in (lay.compiled(r), lay.val_summary(r), lay.gate_summary(r)):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("{}")
    lay.bank_out(r, rounds).parent.mkdir(parents=True, exist_ok=True)
    lay.bank_out(r, rounds).write_text(f'{{"round": {r + 1}}}')  # inject writes the bank for round r + 1


def test_fresh_run_starts_with_training(lay):
    pos = position.position(lay, ROUNDS)
    assert (pos.round, pos.stage) == (0, "train")


def test_baseline_first_when_asked(lay):
    assert position.position(lay, ROUNDS, baseline_val=True).stage == "baseline"


def test_mid_training_crash_resumes_training(lay):
    write_checkpoint(lay.megatron, 1)
    pos = position.position(lay, ROUNDS)
    assert (pos.round, pos.stage) == (0, "train") and "continues to 3" in pos.detail


def test_incomplete_newest_save_is_not_done(lay):
    write_checkpoint(lay.megatron, 3, complete=False)
    assert position.position(lay, ROUNDS).stage == "train"


def test_stage_order_after_training(lay):
    write_checkpoint(lay.megatron, 1)
    write_checkpoint(lay.megatron, 3)
    assert position.position(lay, ROUNDS).stage == "rotate"
    checkpoints.rotate(lay.megatron)
    assert position.position(lay, ROUNDS).stage == "export"
    write_hf(lay.hf_dir(3), 3)
    checkpoints.flip_hf(lay.hf_link, lay.hf_dir(3))
    assert position.position(lay, ROUNDS).stage == "compile"
    lay.compiled(0).parent.mkdir(parents=True)
    lay.compiled(0).write_text("{}")
    pos = position.position(lay, ROUNDS)
    assert pos.stage == "evaluate" and pos.detail == "val pending"
    for p in (lay.val_summary(0), lay.gate_summary(0)):
        p.parent.mkdir(parents=True)
        p.write_text("{}")
    assert position.position(lay, ROUNDS).stage == "inject"
    lay.bank_in(1).parent.mkdir(parents=True, exist_ok=True)
    lay.bank_in(1).write_text("{}")
    assert (position.position(lay, ROUNDS).round, position.position(lay, ROUNDS).stage) == (1, "train")


def test_finished_run(lay):
    for r in range(ROUNDS):
        finish_round(lay, r)
    assert position.position(lay, ROUNDS).finished
    assert lay.final_bank.is_file()


def test_rotation_keeps_newest_and_tracked_and_reports_incomplete(lay):
    for it in (3, 7):
        write_checkpoint(lay.megatron, it)
    write_checkpoint(lay.megatron, 11, complete=False)
    plan = checkpoints.rotate(lay.megatron, dry_run=True)
    assert [p.name for p in plan.delete] == ["global_dataset_state_dict_3.pt", "iter_0000003"]
    assert (lay.megatron / "iter_0000003").exists(), "dry run deleted something"
    plan = checkpoints.rotate(lay.megatron)
    assert sorted(checkpoints.iter_dirs(lay.megatron)) == [7, 11]
    assert any("iter_0000011" in n and "incomplete" in n for n in plan.notes)


def test_rotation_cut_short_leaves_nothing_the_next_one_misses(lay):
    """A kill between deleting an old save and its rollout state file: the next rotation removes
    the stray state file (and never the newest's or the tracked one's)."""
    for it in (3, 7):
        write_checkpoint(lay.megatron, it)
    stray = lay.megatron / "rollout" / "global_dataset_state_dict_3.pt"
    checkpoints.rotate(lay.megatron)
    stray.write_bytes(b"left by a rotation cut short")
    assert not rotate.done(lay, 1, ROUNDS)[0]  # (steps_per_round=4: round 1 ends at iteration 7)
    (lay.megatron / "rollout" / "global_dataset_state_dict_9.pt").write_bytes(b"a save in progress")
    checkpoints.rotate(lay.megatron)
    assert sorted(p.name for p in (lay.megatron / "rollout").iterdir()) == [
        "global_dataset_state_dict_7.pt", "global_dataset_state_dict_9.pt"]
    assert rotate.done(lay, 1, ROUNDS)[0]

def _round_1_on_disk(root):
    """Round 1 trained (steps_per_round=4: saves at 3 and 7) with the plugin's per-step records."""
    lay = RunLayout(root / "runs" / "r1", root / "save" / "r1", steps_per_round=4)
    for it in (3, 7):
        write_checkpoint(lay.megatron, it)
    for it in range(8):
        checkpoints.plugin_record_path(lay.megatron, it).write_text(f'{{"sample_offset": {it}}}')
    return lay


def _tree(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def test_rotation_killed_after_any_deletion_is_redone_or_complete(tmp_path):
    """A kill after each of the rotation's deletions, in its own order: either rotate's done() says
    not done (the resume rotates again) or the disk already is what a whole rotation leaves. Seen in
    CI before the fix: the plugin's records were deleted last, so a kill just before them left
    done() true and a record the uninterrupted run had deleted (test_faults' kill matrix)."""
    whole = _round_1_on_disk(tmp_path / "whole")
    checkpoints.rotate(whole.megatron)
    expected = _tree(tmp_path / "whole")
    for k in range(len(checkpoints.plan_rotation(_round_1_on_disk(tmp_path / "plan").megatron).delete)):
        lay = _round_1_on_disk(tmp_path / f"cut-{k}")
        for path in checkpoints.plan_rotation(lay.megatron).delete[:k]:  # the kill lands after k deletions
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        done, why = rotate.done(lay, 1, ROUNDS)
        if done:
            assert _tree(tmp_path / f"cut-{k}") == expected, f"killed after {k} deletions: done ({why}) too early"
        else:
            checkpoints.rotate(lay.megatron)
            assert _tree(tmp_path / f"cut-{k}") == expected, f"killed after {k} deletions: resumed rotation differs"


def test_rotation_keeps_the_last_save_with_a_data_state_when_the_tracked_one_has_none(lay):
    """slime writes its Megatron save and tracker, then rollout/global_dataset_state_dict_<N>.pt
    (slime train.py:71-80): a kill in between leaves a tracked save without its data position,
    which slime's loader silently restarts at the first task. Rotation keeps the newest save that
    has one and says what the next job will do."""
    write_checkpoint(lay.megatron, 3)
    write_checkpoint(lay.megatron, 7)
    (lay.megatron / "rollout" / "global_dataset_state_dict_7.pt").unlink()  # killed after the tracker
    plan = checkpoints.rotate(lay.megatron)
    assert sorted(checkpoints.iter_dirs(lay.megatron)) == [3, 7]
    assert any("iter_0000007 has no data-source state" in n and "first task" in n and "iter_0000003" in n
               for n in plan.notes), plan.notes
    assert rotate.done(lay, 1, ROUNDS)[0]  # (round 1 ends at iteration 7): the kept save is no leftover
    (lay.megatron / "rollout" / "shopsimrl_data_state_7.json").write_text('{"sample_offset": 4}')  # the plugin's
    plan = checkpoints.rotate(lay.megatron)
    assert sorted(checkpoints.iter_dirs(lay.megatron)) == [7]
    assert any("shopsimrl_data_state_7.json" in n and "restores" in n for n in plan.notes), plan.notes


def test_rotation_never_deletes_the_tracked_iteration(lay):
    write_checkpoint(lay.megatron, 3)
    write_checkpoint(lay.megatron, 7, tracker=False)  # complete on disk, but the tracker says 3
    checkpoints.rotate(lay.megatron)
    assert sorted(checkpoints.iter_dirs(lay.megatron)) == [3, 7]


def test_hf_flip_is_relative_and_atomic_and_old_exports_go(lay):
    write_hf(lay.hf_dir(3), 3)
    checkpoints.flip_hf(lay.hf_link, lay.hf_dir(3))
    write_hf(lay.hf_dir(7), 7)
    checkpoints.flip_hf(lay.hf_link, lay.hf_dir(7))
    assert not lay.hf_link.readlink().is_absolute()
    checkpoints.remove_old_exports(lay.save_dir, lay.hf_dir(7))
    assert checkpoints.hf_target(lay.hf_link) == lay.hf_dir(7).resolve()
    assert not lay.hf_dir(3).exists()


def test_export_cut_after_the_flip_is_not_done_until_old_exports_are_gone(lay):
    """A kill between the flip and the cleanup (or mid-flip): the export stage is still to do, and
    re-running it (no conversion: hf-7 is complete) removes what was left."""
    write_checkpoint(lay.megatron, 7)
    write_hf(lay.hf_dir(3), 3)
    write_hf(lay.hf_dir(7), 7)
    checkpoints.flip_hf(lay.hf_link, lay.hf_dir(7))
    (lay.save_dir / ".hf.tmp-4242").symlink_to("hf-0000003")
    done, why = export.done(lay, 1, ROUNDS)
    assert not done and "2 older export(s)" in why
    assert export.prepare_export(lay, 1).action == "flip"
    export.finish_export(lay, 1)
    assert export.done(lay, 1, ROUNDS)[0]
    assert sorted(p.name for p in lay.save_dir.iterdir()) == ["hf", "hf-0000007", "megatron"]


def test_hf_problems_names_missing_weights(tmp_path):
    d = write_hf(tmp_path / "hf", 1)
    assert checkpoints.hf_problems(d) == []
    (d / "model-00001-of-00001.safetensors").unlink()
    assert "missing" in checkpoints.hf_problems(d)[0]


def test_flip_refuses_a_real_directory(lay):
    lay.hf_link.mkdir(parents=True)
    with pytest.raises(ToolkitError, match="real directory"):
        checkpoints.flip_hf(lay.hf_link, lay.hf_dir(3))


def test_memo_example_resume_round_1_after_40_steps(tmp_path):
    """Memo M14: round-001 stopped after 40 steps (iter_0000039), no val/gate → ROUND=1."""
    lay = RunLayout(tmp_path / "runs" / "r", tmp_path / "save" / "r", steps_per_round=20)
    finish_round(lay, 0, rounds=5)
    write_checkpoint(lay.megatron, 39)
    pos = position.check_resume_round(lay, 5, 1)
    assert (pos.round, pos.stage) == (1, "rotate")
    with pytest.raises(ToolkitError, match=r"ROUND=2 does not match the disk: round 1 is not finished"):
        position.check_resume_round(lay, 5, 2)
    with pytest.raises(ToolkitError, match=r"ROUND=0 does not match the disk: round 0 is already finished"):
        position.check_resume_round(lay, 5, 0)
    assert (lay.megatron / "iter_0000039").is_dir(), "a refused resume must change nothing"


def test_resume_round_without_previous_checkpoint_is_refused(lay):
    lay.bank_in(1).parent.mkdir(parents=True)
    lay.bank_in(1).write_text("{}")
    with pytest.raises(ToolkitError, match="needs round 0's checkpoint"):
        position.check_resume_round(lay, ROUNDS, 1)


def test_tracker_past_unfinished_round_is_an_error(lay):
    write_checkpoint(lay.megatron, 7)
    with pytest.raises(ToolkitError, match="past round 0's end"):
        position.position(lay, ROUNDS)


def test_a_final_bank_of_a_shorter_run_does_not_finish_a_longer_one(tmp_path):
    """ROUNDS raised after the run ended (allowed): the old final bank is not the new last round's."""
    lay = RunLayout(tmp_path / "run", tmp_path / "save", 2)
    lay.run_dir.mkdir(parents=True)
    lay.final_bank.write_text('{"round": 1, "skills": []}')  # written after round 0 of a ROUNDS=1 run
    assert inject.done(lay, 0, 1)[0]
    done, why = inject.done(lay, 1, 2)
    assert not done and "from round 0's end" in why
    lay.final_bank.write_text('{"round": 2, "skills": []}')
    assert inject.done(lay, 1, 2)[0]


def test_status_step_reads_the_plugin_metrics_last_written_step(tmp_path):
    """make status's step line: the last whole line (a replayed step after a resume is the newest
    line, a torn line is skipped), with the success rate and the groups kept/drawn the plugin logged."""
    from pyhelpers.overview import status
    from pyhelpers.rollout.metrics import append_jsonl, read_jsonl

    lay = RunLayout(tmp_path / "run", tmp_path / "save", 2)
    assert status._step(lay, 1) is None
    groups = {"rollout/shopsim/groups_drawn": 64.0, "rollout/shopsim/groups_kept": 16.0,
              "rollout/shopsim/groups_kept_equal": 3.0, "rollout/shopsim/draw_limit_reached": 1.0}
    for rid, rate in ((2, 0.25), (3, 0.5), (2, 0.75)):  # step 2 replayed after a resume
        append_jsonl(lay.rollout_metrics(1), 1, rid, {"rollout/shopsim/success_rate": rate, **groups})
    with open(lay.rollout_metrics(1), "a") as fh:
        fh.write('{"round": 1, "rollout_id": 3, "metr')  # torn by a kill
    assert status._step(lay, 1) == {"rollout_id": 2, "of": "2..3", "success_rate": 0.75}
    # the dynamic-sampling figures (issue 19): how much the step drew to fill its batch
    from pyhelpers.stages.progress import step_words

    rec = read_jsonl(lay.rollout_metrics(1))[2]["metrics"]
    assert step_words(rec) == "groups kept 16 of 64 (3 without reward variance, draw limit reached), success 75.0%"


def test_the_train_stage_says_what_a_job_does_with_a_save_that_lost_its_data_state(toolkit_env, tmp_path):
    """`make resume` into a train stage prints what slime will do with the tracked save (the
    rotation's notes say the same)."""
    from pyhelpers.config import load
    from pyhelpers.run.layout import from_config
    from pyhelpers.skills.bank import empty_bank, write_bank
    from pyhelpers.stages import train
    from pyhelpers.tasks.files import slime_prompt, write_tasks

    cfg = load.load({**toolkit_env, "TRAIN_TASKS": str(tmp_path / "train.jsonl")})
    lay = from_config(cfg)
    last = lay.last_iteration(0)
    write_tasks(cfg.path("TRAIN_TASKS"), [{"task_id": "t0", "shopsim_idx": 0, "split": "train", "instruction": "买鞋",
                                           "messages": slime_prompt("买鞋")}])  # prepare checks it first
    write_bank(lay.bank_in(1), empty_bank(1))  # round 0's inject ran
    write_checkpoint(lay.megatron, last)
    (lay.megatron / "rollout" / f"global_dataset_state_dict_{last}.pt").unlink()
    said: list[str] = []
    loop = SimpleNamespace(cfg=cfg, lay=lay, echo=said.append)  # what prepare reads of the Loop
    train.prepare(loop, 1)
    assert any(f"iter_{last:07d} has no data-source state" in s and "first task" in s for s in said), said
    checkpoints.plugin_record_path(lay.megatron, last).write_text('{"sample_offset": 8}')
    said.clear()
    train.prepare(loop, 1)
    assert any("restores the data position" in s for s in said), said


def test_status_counts_the_rounds_the_run_was_started_with_not_the_callers(toolkit_env):
    """`make status REHEARSAL=1` loads the rehearsal profile's ROUNDS=2 while the rehearsal runs with
    ROUNDS=5: where the run stands is counted in run.json's rounds (the run's own, kept current by
    `make resume`), not in the caller's."""
    from pyhelpers.config import load
    from pyhelpers.overview import manifest, status
    from pyhelpers.run.layout import from_config

    five = load.load({**toolkit_env, "ROUNDS": "5", "BASELINE_VAL": "0"})
    lay = from_config(five)
    lay.run_dir.mkdir(parents=True)
    manifest.record_or_compare(five, lay.manifest)
    two = load.load({**toolkit_env, "ROUNDS": "2", "BASELINE_VAL": "0"})
    st = status.gather(two, from_config(two))
    assert st["progress"]["rounds"] == 5, st["progress"]
    assert "round 0 (1 of 5)" in status.progress_line(st["progress"], running=False)
