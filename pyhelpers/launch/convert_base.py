"""`make convert-base` (M18): the base model's HF weights -> Megatron torch_dist, with slime's own
tool (CONVERT_TO_TORCH_DIST, which needs the GPUs), for --ref-load and the first --load.

The tool writes into a staging dir beside TORCH_DIST_MODEL (`<name>.partial`); only a complete
result (a tracker naming release/ or an iteration that exists) is renamed into place, so a crash
never leaves a half-converted model where training would load it. An existing complete
conversion is never overwritten.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from pyhelpers.config.load import Config
from pyhelpers.errors import ToolkitError
from pyhelpers.launch import slime_args
from pyhelpers.launch.model_dirs import dist_problems, hf_problems
from pyhelpers.procs.groups import log_tail


def convert(cfg: Config, model_args: list[str], log_path: Path, progress=lambda s: None) -> Path:
    hf, dist = cfg.HF_MODEL, cfg.TORCH_DIST_MODEL
    problems, _ = hf_problems(hf)
    if problems:
        raise ToolkitError(f"the HF model is not usable: {'; '.join(problems)}", f"HF_MODEL={hf}",
                           "put the Qwen3.5-4B HF weights there (copy MODELS_DIR or download them), then again")
    if dist.exists():
        if not dist_problems(dist)[0]:
            raise ToolkitError("the torch_dist model already exists", f"TORCH_DIST_MODEL={dist}",
                               f"nothing to do; to convert again move it aside first (mv {dist} {dist}.old)")
        raise ToolkitError("TORCH_DIST_MODEL exists but is not a complete conversion", str(dist),
                           f"move it aside (mv {dist} {dist}.broken), then `make convert-base` again")
    if not model_args:
        raise ToolkitError("no model arguments", f"MODEL_ARGS_SCRIPT={cfg.MODEL_ARGS_SCRIPT}",
                           "point MODEL_ARGS_SCRIPT at slime's scripts/models/qwen3.5-4B.sh")
    staging = dist.with_name(dist.name + ".partial")
    if staging.exists():
        shutil.rmtree(staging)  # our own leftover of an interrupted conversion
    argv = slime_args.slime_tool(cfg, "CONVERT_TO_TORCH_DIST", *model_args, "--hf-checkpoint", str(hf),
                                  "--save", str(staging))
    progress(f"converting {hf} to torch_dist (GPUs {cfg.cuda_visible_devices}; log: {log_path})")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        log.write(f"==> convert-base: {' '.join(argv)}\n".encode())
        log.flush()
        rc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT).returncode
    problems, found = dist_problems(staging) if staging.exists() else ([f"{staging} was not written"], "")
    if rc != 0 or problems:
        tail = "\n".join(log_tail(log_path, 20))
        raise ToolkitError(f"the conversion failed (exit {rc}{'; ' + problems[0] if problems else ''})",
                           f"{log_path}; last lines:\n{tail}\n", "fix the cause (GPUs free? MODEL_ARGS_SCRIPT "
                           "matches the model?), then `make convert-base` again")
    staging.rename(dist)
    progress(f"wrote {dist} ({found})")
    return dist
