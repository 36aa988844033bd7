"""pyhelpers.capacity.gpumem (the per-GPU memory estimate), `pyhelpers plan memory` and bench/logits_memory.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import ROOT, run_pyhelpers

from pyhelpers.capacity import gpumem
from pyhelpers.cli import main
from pyhelpers.errors import ToolkitError

GIB = gpumem.GIB
BENCH = ROOT / "bench" / "logits_memory.py"


# ------------------------------------------------------------------ arithmetic
def test_vocab_per_rank_splits_qwen_vocab_exactly():
    assert [gpumem.vocab_per_rank(gpumem.QWEN35_4B, tp) for tp in (1, 2, 4)] == [248_320, 124_160, 62_080]


def test_vocab_is_padded_to_a_multiple_of_128_times_tp():
    m = gpumem.Model("toy", vocab=1000, hidden=8, layers=1, params=1e6, max_tp=8)
    assert gpumem.vocab_per_rank(m, 1) == 1024
    assert gpumem.vocab_per_rank(m, 8) == 128  # 1000 -> 1024 = 8 x 128


@pytest.mark.parametrize("path,per_element", [("reference", 12), ("slime", 8), ("slime-chunked", 8),
                                              ("slime-temperature", 12)])
def test_logits_peak_bytes_per_element(path, per_element):
    peak, step = gpumem.logits_peak(path, 16384, 124_160, chunk=1024, hidden=2560)
    assert peak == per_element * 16384 * 124_160
    assert step


def test_reference_measured_on_h200_rows():
    # Measured peaks (bytes) from docs/oom_qwen35_4b.md's table, H200, torch 2.11.
    assert abs(gpumem.logits_peak("reference", 16384, 124_160)[0] / GIB - 22.734) < 0.001
    assert abs(gpumem.logits_peak("slime", 32768, 248_320)[0] / GIB - 60.625) < 0.001
    assert abs(gpumem.logits_peak("reference-chunked", 4096, 248_320, 1024, 2560)[0] / GIB - 5.925) < 0.001
    assert abs(gpumem.logits_peak("reference-recompute", 4096, 248_320, 1024, 2560)[0] / GIB - 4.041) < 0.001


def test_chunked_reference_peak_terms():
    t, v, h, c = 4096, 248_320, 2560, 1024
    # The second chunk's backward wins when the weight-grad buffer (2 V H) outgrows 4 c V.
    assert gpumem.logits_peak("reference-chunked", t, v, c, h)[0] == 4 * t * v + 4 * c * v + 2 * v * h + 2 * c * h
    assert gpumem.logits_peak("reference-recompute", t, v, c, h)[0] == 12 * c * v + 2 * v * h + 2 * (t - c) * h
    # One chunk covering everything is the unchunked formula's saved output + 2 grads.
    assert gpumem.logits_peak("reference-chunked", t, v, 0, h)[0] == 12 * t * v


def test_chunk_rows_follows_torch_chunk():
    assert gpumem.chunk_rows(4096, 1024) == 1024
    assert gpumem.chunk_rows(5000, 1024) == 1000  # 5 pieces of 1000
    assert gpumem.chunk_rows(100, 0) == 100


def test_plan_terms_for_memo_defaults():
    p = gpumem.plan(24576, 2, 4)
    assert p.dp == 2 and p.vocab_rank == 124_160
    assert p.terms["logits"] == 8 * 24576 * 124_160
    assert p.terms["weights"] == int(2 * 4.2e9 / 2)
    assert p.terms["grads"] == int(4 * 4.2e9 / 2)
    assert p.terms["optimizer"] == int(12 * 4.2e9 / 4)
    assert p.terms["activations"] == 2 * 2560 * 32 * 24576 // 2
    assert p.total == sum(p.terms.values())
    assert gpumem.plan(24576, 2, 4, recompute=False).terms["activations"] == 20 * p.terms["activations"]


def test_plan_rejects_tp_that_does_not_divide_gpus():
    with pytest.raises(ToolkitError, match="NUM_GPUS=3 is not divisible by TP_SIZE=2"):
        gpumem.plan(4096, 2, 3)


def test_table_shape_and_impossible_cells():
    rows = gpumem.table(4)
    assert len(rows) == len(gpumem.TABLE_TOKENS) and all(len(r) == len(gpumem.TABLE_TP) for r in rows)
    assert [r[0].tokens for r in rows] == list(gpumem.TABLE_TOKENS)
    one_gpu = gpumem.table(1)
    assert all(r[0] is not None and r[1] is None and r[2] is None for r in one_gpu)


# ------------------------------------------------------------------ verdict and WARN
def test_defaults_fit_an_80gb_a800():
    v = gpumem.verdict(16384, 24576, 2, 4, 80, 0.9)
    assert v.fits and v.warning is None
    assert v.plan.tokens == 24576  # the context cap, not MAX_TOKENS_PER_GPU, sets the largest micro-batch
    assert v.limit_bytes == int(72 * GIB)


def test_warning_names_the_knobs_and_values_that_fit():
    v = gpumem.verdict(32768, 32768, 1, 4, 80, 0.9)
    assert not v.fits
    assert v.max_tokens_fit == 16384 and v.tp_fit == 2
    assert gpumem.plan(16384, 1, 4).total <= v.limit_bytes < gpumem.plan(17408, 1, 4).total
    assert v.warning == (
        "WARN: peak 102.8 GiB per GPU exceeds 72.0 GiB (MEMORY_WARN_FRACTION=0.9 x GPU_MEMORY_GB=80): "
        "lower MAX_TOKENS_PER_GPU and ROLLOUT_MAX_CONTEXT_LEN to <= 16384 (a longer episode is a "
        "micro-batch of its own) or raise TP_SIZE to 2")


def test_warning_names_only_the_knob_above_the_fit():
    v = gpumem.verdict(16384, 24576, 1, 4, 80, 0.9)
    assert "lower ROLLOUT_MAX_CONTEXT_LEN to <= 16384" in v.warning
    assert "MAX_TOKENS_PER_GPU" not in v.warning.split(": ", 2)[2]


def test_warning_when_nothing_fits_points_at_model_state():
    v = gpumem.verdict(4096, 4096, 1, 1, 80, 0.9)
    assert not v.fits and v.max_tokens_fit is None and v.tp_fit is None
    assert "weights, grads and optimizer alone take 70.4 GiB" in v.warning


@pytest.mark.parametrize("gpu,fraction,knob", [(80, 1.5, "MEMORY_WARN_FRACTION"), (0, 0.9, "GPU_MEMORY_GB")])
def test_bad_budget_knobs(gpu, fraction, knob):
    with pytest.raises(ToolkitError, match=knob):
        gpumem.verdict(16384, 24576, 2, 4, gpu, fraction)


def test_memplan_imports_only_the_standard_library():
    code = ("import sys; before = set(sys.modules); import pyhelpers.capacity.gpumem; "
            "new = sorted(m.split('.')[0] for m in set(sys.modules) - before); print(' '.join(new))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    top = set(out.stdout.split()) - {"pyhelpers"}
    stdlib = set(sys.stdlib_module_names) | {"_distutils_hack"}
    assert top <= stdlib, top - stdlib


# ------------------------------------------------------------------ CLI
def test_plan_memory_defaults_text(toolkit_env):
    r = CliRunner().invoke(main, ["plan", "memory"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0] == ("Memory plan per GPU: Qwen3.5-4B, NUM_GPUS=4, TP_SIZE=2 (DP=2), logits path: slime, "
                        "recompute: full")
    assert "micro-batch T = 24576 tokens = max(MAX_TOKENS_PER_GPU=16384, ROLLOUT_MAX_CONTEXT_LEN=24576)" in lines[1]
    assert "    22.73 GiB  logits [T, V/TP] = [24576, 124160] x 8 B" in r.output
    assert "    50.08 GiB  total per GPU" in r.output
    assert "fits: yes, 50.08 GiB <= 72.00 GiB (MEMORY_WARN_FRACTION=0.9 x GPU_MEMORY_GB=80)" in r.output
    assert "WARN:" not in r.output
    table = r.output.split("'-' = TP_SIZE not possible:\n", 1)[1].splitlines()
    assert len(table) == 1 + len(gpumem.TABLE_TOKENS)
    assert table[4].split()[:3] == ["24576", "86.42", "("] and table[4].rstrip().endswith("31.91 ( 11.37)")
    assert "!" in table[4] and "!" not in table[3]


def test_plan_memory_warns_and_strict_exits_1(toolkit_env, monkeypatch):
    monkeypatch.setenv("TP_SIZE", "1")
    r = CliRunner().invoke(main, ["plan", "memory"])
    assert r.exit_code == 0
    assert "WARN: peak 86.4 GiB per GPU exceeds 72.0 GiB" in r.output
    assert "lower ROLLOUT_MAX_CONTEXT_LEN to <= 16384" in r.output and "raise TP_SIZE to 2" in r.output
    assert CliRunner().invoke(main, ["plan", "memory", "--strict"]).exit_code == 1


def test_plan_memory_json(toolkit_env, monkeypatch):
    monkeypatch.setenv("GPU_MEMORY_GB", "40")
    r = CliRunner().invoke(main, ["plan", "memory", "--json", "--path", "reference"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["knobs"]["GPU_MEMORY_GB"] == 40 and doc["path"] == "reference"
    assert doc["plan"]["terms_bytes"]["logits"] == 12 * 24576 * 124_160
    assert doc["fits"] is False and doc["warning"].startswith("WARN: ")
    assert doc["alternative"]["path"] == "slime"
    assert len(doc["table"]) == len(gpumem.TABLE_TOKENS) * len(gpumem.TABLE_TP)
    assert set(doc["rough_terms"]) == {"weights", "grads", "optimizer", "activations", "runtime"}


def test_plan_memory_bad_knob_is_one_line_error(toolkit_env):
    env = {**toolkit_env, "NUM_GPUS": "3"}

    r = run_pyhelpers(["plan", "memory"], env)
    assert r.returncode == 1
    assert "NUM_GPUS=3 is not divisible by TP_SIZE=2" in r.stderr and "Traceback" not in r.stderr


# ------------------------------------------------------------------ benchmark script
def _bench(*args):
    """Run the benchmark with `import torch` failing, whether or not torch is installed here."""
    code = (f"import sys, runpy; sys.modules['torch'] = None; sys.argv = ['logits_memory.py', *{list(args)!r}]; "
            f"runpy.run_path({str(BENCH)!r}, run_name='__main__')")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_bench_without_torch_says_torch_with_cuda_is_required():
    r = _bench()
    assert r.returncode == 2
    assert r.stderr.startswith("torch with CUDA is required: torch is not importable here")


def test_bench_help_and_dry_run_need_no_torch():
    assert _bench("--help").returncode == 0
    r = _bench("--dry-run", "--tokens", "16384", "--tp", "2", "--variants", "reference,slime")
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines()[1:]]
    assert rows == [["reference", "16384", "2", "124160", "-", "22.734", "-"],
                    ["slime", "16384", "2", "124160", "-", "15.156", "-"]]


def test_bench_rejects_unknown_variant():
    r = _bench("--variants", "nope", "--dry-run")
    assert r.returncode == 2 and "unknown variant(s) nope" in r.stderr
