"""`make doctor` checks HF_MODEL's config.json the way slime's job will at its start (issue 40 item
19): slime compares the model flags with text_config alone when the config has one, and a field
text_config leaves out takes transformers' class default (Qwen3.5's text config: untied), so a
config.json whose tie_word_embeddings is only at its top level is refused by the job. Small
config.json files against the stand-in model script (Qwen3.5-4B's flags: tied embeddings)."""

from __future__ import annotations

import json

import pytest
from conftest import FAKES
from support.tokenizer import CONFIG

from pyhelpers.config import load
from pyhelpers.doctor import runner

SCRIPT_FLAGS = FAKES / "slime_stub" / "scripts" / "models" / "qwen3.5-4B.sh"
TEXT = {"model_type": "qwen3_5_text", "hidden_size": 2560, "intermediate_size": 9216, "num_hidden_layers": 32,
        "num_attention_heads": 16, "rms_norm_eps": 1e-06,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25}}


def _config_check(toolkit_env, tmp_path, cfg, script=SCRIPT_FLAGS):
    hf = tmp_path / "models" / "Qwen3.5-4B"
    hf.mkdir(parents=True, exist_ok=True)
    (hf / "config.json").write_text(json.dumps(cfg) if isinstance(cfg, dict) else cfg)
    env = {**toolkit_env, "MODELS_DIR": str(tmp_path / "models"), "MODEL_ARGS_SCRIPT": str(script)}
    got = {r.name: r for r in runner.run_checks(load.load(env), env, only=["model-config"])}
    return got["model-config"], hf / "config.json"


def test_tie_word_embeddings_only_at_the_top_level_is_refused_naming_file_field_values_and_fix(toolkit_env, tmp_path):
    cfg = {"model_type": "qwen3_5", "tie_word_embeddings": True, "text_config": TEXT}
    got, path = _config_check(toolkit_env, tmp_path, cfg)
    assert got.status == "FAIL", got.line()
    assert str(path) in got.found and "text_config.tie_word_embeddings = false" in got.found, got.found
    assert "--untie-embeddings-and-output-weights not given" in got.found, got.found
    assert 'add "tie_word_embeddings": true to text_config' in got.fix, got.fix
    assert "the top level says true; slime reads only text_config" in got.fix, got.fix


def test_a_config_slime_accepts_passes(toolkit_env, tmp_path):
    cfg = {"model_type": "qwen3_5", "tie_word_embeddings": True, "text_config": {**TEXT, "tie_word_embeddings": True}}
    got, path = _config_check(toolkit_env, tmp_path, cfg)
    assert got.status == "PASS", got.line()
    for field in ("hidden_size", "num_hidden_layers", "intermediate_size", "tie_word_embeddings", "rms_norm_eps",
                  "rope_theta"):
        assert f"text_config.{field}" in got.found, got.found


def test_the_stand_in_model_config_passes_against_the_stand_in_model_script(toolkit_env, tmp_path):
    """What the rehearsal and the tests' HF dirs carry (tests/support/tokenizer.py CONFIG) is a
    config slime accepts with the stand-in slime's Qwen3.5-4B flags."""
    got, _ = _config_check(toolkit_env, tmp_path, CONFIG)
    assert got.status == "PASS", got.line()


def test_a_qwen35_config_without_text_config_is_compared_with_transformers_defaults(toolkit_env, tmp_path):
    """transformers builds Qwen3.5's text_config from its defaults (hidden 4096, ...) when config.json
    has none: slime then compares those, not the top level's."""
    got, _ = _config_check(toolkit_env, tmp_path, {"model_type": "qwen3_5", "hidden_size": 2560,
                                                   "tie_word_embeddings": True})
    assert got.status == "FAIL", got.line()
    assert "text_config.hidden_size = 4096 (left out: transformers' qwen3_5_text default)" in got.found, got.found
    assert "--hidden-size 2560" in got.found, got.found


def test_a_model_other_than_the_flags_describe_names_both_values(toolkit_env, tmp_path):
    cfg = {"model_type": "qwen3_5", "text_config": {**TEXT, "hidden_size": 4096, "tie_word_embeddings": True,
                                                      "rope_parameters": {"rope_theta": 5000000}}}
    got, _ = _config_check(toolkit_env, tmp_path, cfg)
    assert got.status == "FAIL", got.line()
    assert "text_config.hidden_size = 4096 but --hidden-size 2560" in got.found, got.found
    assert "text_config.rope_theta = 5000000 but --rotary-base 10000000" in got.found, got.found
    assert "HF_MODEL and MODEL_ARGS_SCRIPT describe different models" in got.fix, got.fix


def test_a_text_only_config_is_compared_at_its_top_level_and_megatron_defaults_count(toolkit_env, tmp_path):
    script = tmp_path / "model.sh"
    script.write_text("MODEL_ARGS=(--hidden-size 2560 --num-layers 32 --num-attention-heads 16 "
                      "--ffn-hidden-size 9216 --rotary-base=10000000)\n")
    cfg = {**TEXT, "tie_word_embeddings": True}
    got, _ = _config_check(toolkit_env, tmp_path, cfg, script=script)
    assert got.status == "FAIL", got.line()
    # no --norm-epsilon: Megatron's default 1e-5 is what slime compares
    assert "rms_norm_eps = 1e-06 but --norm-epsilon 1e-05 (Megatron's default)" in got.found, got.found
    assert "text_config." not in got.found


def test_config_json_that_transformers_cannot_load_fails(toolkit_env, tmp_path):
    got, path = _config_check(toolkit_env, tmp_path, "{not json")
    assert got.status == "FAIL" and str(path) in got.found and "not valid JSON" in got.found, got.line()
    got, _ = _config_check(toolkit_env, tmp_path, {"torch_dtype": "bfloat16"})
    assert got.status == "FAIL" and "no model_type" in got.found, got.line()


@pytest.mark.parametrize("freq, dense", [("1", False), ("0", True), ("([0]+[1]*3)*8", True), ("[1]*32", False)])
def test_an_moe_config_skips_intermediate_size_as_slime_does(freq, dense):
    """slime compares intermediate_size of an MoE config only when --moe-layer-freq has a dense layer."""
    from pyhelpers.doctor import hf_config

    cfg = {"model_type": "some_moe", "hidden_size": 2048, "intermediate_size": 5632, "moe_intermediate_size": 512,
           "num_experts": 8}
    argv = ["--hidden-size", "2048", "--ffn-hidden-size", "512", "--moe-ffn-hidden-size", "512",
            "--moe-layer-freq", freq]
    verdict = hf_config.compare(cfg, argv)
    assert [m.field for m in verdict.mismatches] == (["intermediate_size"] if dense else [])
