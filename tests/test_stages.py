"""Export decisions and stage records; the `run` CLI the driver reads."""

from __future__ import annotations

import json

import pytest
from conftest import run_pyhelpers
from fakes.megatron_layout import VISUAL_WEIGHTS, write_checkpoint, write_hf, write_hf_base, write_hf_export

from pyhelpers.errors import ToolkitError
from pyhelpers.run import checkpoints
from pyhelpers.run.layout import RunLayout
from pyhelpers.run.records import write_record
from pyhelpers.stages import export


@pytest.fixture
def lay(tmp_path):
    return RunLayout(tmp_path / "runs" / "r", tmp_path / "save" / "r", steps_per_round=2)


def test_export_refused_without_the_rounds_checkpoint(lay):
    with pytest.raises(ToolkitError, match="iter_0000001 is missing or incomplete"):
        export.prepare_export(lay, 0)


def test_slimes_own_export_is_flipped_not_converted(lay):
    write_checkpoint(lay.megatron, 1)
    write_hf(lay.hf_dir(1), 1)
    assert export.prepare_export(lay, 0).action == "flip"
    target, removed = export.finish_export(lay, 0)
    assert checkpoints.hf_target(lay.hf_link) == target.resolve() and removed == []


def test_half_written_export_is_converted_again_through_staging(lay):
    write_checkpoint(lay.megatron, 1)
    lay.hf_dir(1).mkdir(parents=True)
    (lay.hf_dir(1) / "config.json").write_text("{}")  # crash mid-write: no weights
    plan = export.prepare_export(lay, 0)
    assert plan.action == "convert" and not lay.hf_dir(1).exists()
    write_hf(plan.staging, 1)  # what the converter writes
    export.finish_export(lay, 0)
    assert not plan.staging.exists() and checkpoints.hf_problems(lay.hf_dir(1)) == []


def test_incomplete_converter_output_is_refused_and_hf_left_alone(lay):
    write_checkpoint(lay.megatron, 1)
    write_hf(lay.hf_dir(1), 1)
    export.finish_export(lay, 0)
    write_checkpoint(lay.megatron, 3)
    plan = export.prepare_export(lay, 1)
    plan.staging.mkdir(parents=True)
    with pytest.raises(ToolkitError, match="converter's output is incomplete"):
        export.finish_export(lay, 1)
    assert checkpoints.hf_target(lay.hf_link) == lay.hf_dir(1).resolve(), "the old export must stay served"


def test_stage_record_paths_are_relative(lay):
    path = write_record(lay, 0, "export", target=lay.hf_dir(1))
    rec = json.loads(path.read_text())
    assert rec["target"] == "$SAVE_DIR/hf-0000001"


def test_run_init_cli(toolkit_env, tmp_path):
    env = {**toolkit_env, "STEPS_PER_ROUND": "2", "ROUNDS": "2"}
    init = run_pyhelpers(["run", "init"], env)
    assert init.returncode == 0, init.stderr
    assert (tmp_path / "runs" / "qwen35-4b-train-100" / "run.json").is_file()
    bad = run_pyhelpers(["run", "init"], {**env, "TP_SIZE": "1"})
    assert bad.returncode == 1 and "TP_SIZE: '2' -> '1'" in bad.stderr and "Traceback" not in bad.stderr


def test_a_stages_log_is_found_by_the_stages_name(toolkit_env, tmp_path):
    """`make logs SERVICE=export` shows the log the registry names for export (convert.log)."""
    logs = tmp_path / "runs" / "qwen35-4b-train-100" / "logs"
    logs.mkdir(parents=True)
    (logs / "convert.log").write_text("converting iter_0000001\n")
    out = run_pyhelpers(["run", "logs", "--service", "export"], toolkit_env)
    assert out.returncode == 0, out.stderr
    assert "converting iter_0000001" in out.stdout


def test_the_registry_orders_resume_by_each_stages_done(lay):
    """position() walks the registry: a stage added to ROUND is where a run resumes when its done()
    is false -- no second list to update."""
    from pyhelpers import stages
    from pyhelpers.stages import position

    assert all(stages.get(n).done is not None and stages.get(n).run is not None for n in stages.ALL_NAMES)
    assert position.position(lay, 1).stage == stages.NAMES[0]
    assert position.position(lay, 1, baseline_val=True).stage == stages.BASELINE.name


@pytest.fixture
def base_model(tmp_path):
    assets = tmp_path / "assets"
    assets.mkdir()
    (assets / "config.json").write_text('{"model_type": "qwen3_5"}\n')
    return write_hf_base(tmp_path / "Qwen3.5-4B", assets)


def _convert(src, out, origin, *extra):
    import subprocess
    import sys

    from conftest import FAKES

    tool = FAKES / "slime_stub" / "tools" / "convert_torch_dist_to_hf.py"
    return subprocess.run([sys.executable, str(tool), "--input-dir", str(src), "--output-dir", str(out),
                           "--origin-hf-dir", str(origin), *extra], capture_output=True, text=True, timeout=60)


def _logged_convert(lay, src, out, origin, *extra, env=None):
    """The converter run as the export stage runs it: its output appended to logs/convert.log after
    the spawn's start line (procs.spawn)."""
    import os
    import subprocess
    import sys

    from conftest import FAKES

    tool = FAKES / "slime_stub" / "tools" / "convert_torch_dist_to_hf.py"
    argv = [sys.executable, str(tool), "--input-dir", str(src), "--output-dir", str(out), "--origin-hf-dir",
            str(origin), *extra]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})})
    lay.logs.mkdir(parents=True, exist_ok=True)
    with open(lay.logs / export.LOG, "a") as log:
        log.write(f"==> 2026-01-01T00:00:00 start convert: {' '.join(argv)}\n{res.stdout}{res.stderr}")
    return res


def test_an_export_without_the_visual_tower_is_refused_and_the_full_one_flipped(lay, base_model):
    """The converter writes only what Megatron holds; Qwen3.5's visual tower comes from the original
    HF dir with -a. An export is complete only with every weight name of the original's index."""
    write_checkpoint(lay.megatron, 1)
    plan = export.prepare_export(lay, 0, origin=base_model)
    assert _logged_convert(lay, plan.source, plan.staging, base_model).returncode == 0  # no -a
    with pytest.raises(ToolkitError, match=r"2 weight\(s\) of the original model missing.*model\.visual"):
        export.finish_export(lay, 0, origin=base_model)
    assert checkpoints.hf_target(lay.hf_link) is None
    plan = export.prepare_export(lay, 0, origin=base_model)
    assert _logged_convert(lay, plan.source, plan.staging, base_model, *export.CONVERTER_FLAGS).returncode == 0
    target, _ = export.finish_export(lay, 0, origin=base_model)
    assert checkpoints.weight_names(target).keys() >= set(VISUAL_WEIGHTS)


def test_a_converter_that_copied_the_language_model_from_the_original_is_refused(lay, base_model):
    """With -a every weight the converter did not write comes from the original, so "nothing of
    the original missing" holds even when it wrote none of the trained weights: the export would be
    the base model. Every weight it reports adding ("add NAME from origin hf checkpoint", slime
    tools/convert_torch_dist_to_hf.py:133) must be one the trained model does not hold."""
    write_checkpoint(lay.megatron, 1)
    plan = export.prepare_export(lay, 0, origin=base_model)
    broken = _logged_convert(lay, plan.source, plan.staging, base_model, *export.CONVERTER_FLAGS,
                             env={"FAKE_CONVERT_NO_LANGUAGE": "1"})
    assert broken.returncode == 0 and "add model.language_model.norm.weight from origin hf checkpoint" in broken.stdout
    with pytest.raises(ToolkitError, match=r"3 weight\(s\) the trained model holds.*model\.language_model"):
        export.finish_export(lay, 0, origin=base_model)
    assert checkpoints.hf_target(lay.hf_link) is None and not lay.hf_dir(1).exists()


def test_an_export_whose_log_does_not_say_what_was_added_is_refused(lay, base_model):
    """No "add ..." line for the visual tower, which only the original can supply: the log cannot
    tell trained weights from copied ones (another converter, or another log), so no flip."""
    write_checkpoint(lay.megatron, 1)
    plan = export.prepare_export(lay, 0, origin=base_model)
    assert _convert(plan.source, plan.staging, base_model, *export.CONVERTER_FLAGS).returncode == 0  # log not kept
    with pytest.raises(ToolkitError, match=r"does not say .*model\.visual"):
        export.finish_export(lay, 0, origin=base_model)
    assert checkpoints.hf_target(lay.hf_link) is None


def test_slimes_save_hf_export_lacks_the_visual_tower_so_it_is_converted(lay, base_model):
    write_checkpoint(lay.megatron, 1)
    write_hf_export(lay.hf_dir(1), base_model, 1)  # what --save-hf writes (assets + Megatron's weights)
    assert export.prepare_export(lay, 0, origin=base_model).action == "convert"


def test_a_half_written_shard_is_an_incomplete_export(tmp_path):
    d = write_hf(tmp_path / "hf", 1)
    shard = d / "model-00001-of-00001.safetensors"
    shard.write_bytes(shard.read_bytes()[:6])  # killed while writing the header
    assert "unreadable" in checkpoints.hf_problems(d)[0]


def test_save_hf_export_is_completed_from_hf_model_by_hard_links_and_flipped(lay, base_model):
    """Cut 6 (issue 29): slime's --save-hf writes no visual tower (hf_checkpoint_saver.py:78); with
    SAVE_HF=1 the export stage links it from HF_MODEL, checks every name and shape, and flips."""
    write_checkpoint(lay.megatron, 1)
    write_hf_export(lay.hf_dir(1), base_model, 1)  # as --save-hf writes it: no visual tower
    said = []
    plan = export.prepare_export(lay, 0, origin=base_model, save_hf=True, say=said.append)
    assert plan.action == "flip" and "completed from HF_MODEL by hard links" in said[0]
    target, _ = export.finish_export(lay, 0, origin=base_model)
    assert checkpoints.weight_names(target).keys() >= set(VISUAL_WEIGHTS)
    linked = target / "origin-model-00002-of-00002.safetensors"
    assert linked.stat().st_ino == (base_model / "model-00002-of-00002.safetensors").stat().st_ino
    assert export.prepare_export(lay, 0, origin=base_model, save_hf=True).action == "flip"  # a resume: again ok


def test_save_hf_export_whose_shapes_differ_falls_back_to_the_converter(lay, base_model):
    from fakes.megatron_layout import origin_weights, write_safetensors

    write_checkpoint(lay.megatron, 1)
    write_hf_export(lay.hf_dir(1), base_model, 1)
    shard = next(lay.hf_dir(1).glob("*.safetensors"))
    tensors = {n: (v[:100] if i == 0 else v) for i, (n, v) in enumerate(origin_weights(lay.hf_dir(1)).items())}
    write_safetensors(shard, tensors)  # one trained weight of the wrong shape
    said = []
    plan = export.prepare_export(lay, 0, origin=base_model, save_hf=True, say=said.append)
    assert plan.action == "convert" and not lay.hf_dir(1).exists()
    assert "differs from HF_MODEL" in said[0] and "U8[100] where HF_MODEL has U8[512]" in said[0]
    assert said[0].endswith("; converting instead")
