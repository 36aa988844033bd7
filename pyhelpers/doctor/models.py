"""Base models (M18): the HF dir is complete, its config.json agrees with the model flags as slime
will check it (hf_config.py), the torch_dist conversion of it exists."""

from __future__ import annotations

from pathlib import Path

from pyhelpers.doctor import hf_config
from pyhelpers.doctor.base import FAIL, PASS, SKIP, WARN, CheckError, Context, Result, result
from pyhelpers.doctor.flags import model_args
from pyhelpers.launch.model_dirs import dist_problems, hf_problems


def check_models(ctx: Context) -> list[Result]:
    hf, dist = ctx.cfg.HF_MODEL, ctx.cfg.TORCH_DIST_MODEL
    out = []
    problems, facts = hf_problems(hf)
    if problems:
        out.append(result("model-hf", FAIL, f"HF_MODEL={hf}: " + "; ".join(problems),
                          fix="put the Qwen3.5-4B HF weights (config.json, tokenizer, *.safetensors) into HF_MODEL, "
                          "e.g. copy MODELS_DIR from the old machine or download them again (M18)"))
    else:
        out.append(result("model-hf", PASS, f"HF_MODEL={hf}: config.json, tokenizer, " + "; ".join(facts)))
    out.append(check_config(ctx, hf / "config.json"))
    problems, found = dist_problems(dist)
    if problems:
        out.append(result("model-torch-dist", FAIL, f"TORCH_DIST_MODEL={dist}: " + "; ".join(problems),
                          fix="convert the HF weights with `make convert-base` (it runs "
                          f"{ctx.cfg.CONVERT_TO_TORCH_DIST} with the flags of {ctx.cfg.MODEL_ARGS_SCRIPT}, "
                          f"--hf-checkpoint {hf} --save {dist}; needs the GPUs)"))
    else:
        out.append(result("model-torch-dist", PASS, f"TORCH_DIST_MODEL={dist}: {found}"))
    return out


def check_config(ctx: Context, path: Path) -> Result:
    """config.json against MODEL_ARGS, field by field as slime's job will compare them at its start."""
    name, script = "model-config", ctx.cfg.MODEL_ARGS_SCRIPT
    if not path.is_file():
        return result(name, SKIP, f"{path} is missing", fix="fix the model-hf line above first")
    try:
        cfg = hf_config.read_config(path)
    except ValueError as exc:
        return result(name, FAIL, f"{path}: {exc}", fix="put the config.json that came with the model's weights "
                      "into HF_MODEL (download it again)")
    try:
        verdict = hf_config.compare(cfg, model_args(ctx))
    except CheckError as exc:
        return result(name, FAIL, exc.found, fix=exc.fix)
    except hf_config.FlagError as exc:
        return result(name, FAIL, f"MODEL_ARGS of {script}: {exc}", fix="fix the flag in that script: Megatron's "
                      "parser refuses it when the job starts")
    if verdict.mismatches:
        return result(name, FAIL, f"{path}: slime's job would refuse it at its start (hf_validate_args, against the "
                      f"flags of {script}): " + "; ".join(m.text() for m in verdict.mismatches),
                      fix=f"in {path}: " + "; ".join(dict.fromkeys(m.fix for m in verdict.mismatches)))
    agree = f"{len(verdict.compared)} field(s) slime compares agree with the flags of {script}"
    if verdict.unchecked:
        return result(name, WARN, f"{path}: {agree}; {', '.join(verdict.unchecked)} left out, so slime compares "
                      "transformers' defaults, which this check does not know for this model type",
                      fix="write them into config.json with the values of the flags to have them checked")
    return result(name, PASS, f"{path}: {agree} ({', '.join(verdict.compared)})")
