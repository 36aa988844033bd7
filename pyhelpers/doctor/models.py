"""Base models (M18): the HF dir is complete, the torch_dist conversion of it exists."""

from __future__ import annotations

from pyhelpers.doctor.base import FAIL, PASS, Context, Result, result
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
    problems, found = dist_problems(dist)
    if problems:
        out.append(result("model-torch-dist", FAIL, f"TORCH_DIST_MODEL={dist}: " + "; ".join(problems),
                          fix="convert the HF weights with `make convert-base` (it runs "
                          f"{ctx.cfg.CONVERT_TO_TORCH_DIST} with the flags of {ctx.cfg.MODEL_ARGS_SCRIPT}, "
                          f"--hf-checkpoint {hf} --save {dist}; needs the GPUs)"))
    else:
        out.append(result("model-torch-dist", PASS, f"TORCH_DIST_MODEL={dist}: {found}"))
    return out
