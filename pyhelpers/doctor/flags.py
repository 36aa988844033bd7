"""The plan's command lines against the INSTALLED parsers (issue 19): slime's train.py (slime +
Megatron + slime's --sglang- flags) and the eval server's `sglang.launch_server`.

slime ignores a flag no parser knows (Megatron's parse with ignore_unknown_args=True, slime 624b824
slime/backends/megatron_utils/arguments.py:195), so a flag that a version change renamed would
silently do nothing. The toolkit's own list (pyhelpers/launch/slime_flags.py) is checked against the
pinned versions; this checks what is installed on the machine, on the CPU, by building the
parsers inside the activated slime env (flags_probe.py) and naming every flag they do not know.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

from pyhelpers.doctor.base import FAIL, PASS, CheckError, Context, Result, result, tail
from pyhelpers.doctor.conda import missing_env, run_in_env
from pyhelpers.doctor.flags_probe import MARKER
from pyhelpers.launch import sglang_server, slime_args
from pyhelpers.run.layout import from_config

PROBE_FILE = Path(__file__).with_name("flags_probe.py")


def model_args(ctx: Context) -> list[str]:
    """MODEL_ARGS of slime's model script, as bin/lib.sh load_model_args reads them (once: the
    models check compares them with HF_MODEL's config.json too)."""
    return ctx.cached("model-args", lambda: _source_model_args(ctx))


def _source_model_args(ctx: Context) -> list[str]:
    script = ctx.cfg.MODEL_ARGS_SCRIPT
    if not script.is_file():
        raise CheckError(f"slime's model script is missing: MODEL_ARGS_SCRIPT={script}",
                         "point MODEL_ARGS_SCRIPT at scripts/models/qwen3.5-4B.sh of your slime checkout")
    out = subprocess.run(["bash", "-c", 'source "$1" && printf "%s\\n" "${MODEL_ARGS[@]}"', "model-args", str(script)],
                         capture_output=True, text=True, timeout=30, check=False)
    if out.returncode != 0:
        raise CheckError(f"sourcing {script} failed: {tail(out.stderr)}", "fix the script, or MODEL_ARGS_SCRIPT")
    return [a for a in out.stdout.splitlines() if a]


def plan_argvs(ctx: Context) -> tuple[list[str], list[str]]:
    """slime train.py's flags (MODEL_ARGS first, as the job runs them) and the eval server's."""
    cfg = ctx.cfg
    slime = [*model_args(ctx), *slime_args.job_flags(cfg, from_config(cfg), r=0)]
    launcher = shlex.split(cfg.SGLANG_LAUNCHER)
    sglang = sglang_server.eval_server(cfg, str(from_config(cfg).hf_link))[len(launcher):]
    return slime, sglang


def check_flags(ctx: Context) -> list[Result]:
    why = missing_env(ctx, "SLIME_ENV")
    if why:
        raise CheckError(why, "fix the conda check first (CONDA_ROOT, SLIME_ENV)")
    slime, sglang = plan_argvs(ctx)
    request = {"paths": [str(ctx.cfg.MEGATRON_DIR), str(ctx.cfg.SLIME_DIR)], "slime": slime, "sglang": sglang}
    proc = run_in_env(ctx, "SLIME_ENV", ["python3", "-", json.dumps(request)],
                      stdin=PROBE_FILE.read_text(encoding="utf-8"))
    found = next((line[len(MARKER):] for line in proc.stdout.splitlines() if line.startswith(MARKER)), None)
    if found is None:
        raise CheckError(f"the flag probe did not run in SLIME_ENV={ctx.cfg.SLIME_ENV} (exit {proc.returncode}): "
                         f"{tail(proc.stderr or proc.stdout) or 'no output'}", "run `make doctor` again after the "
                         "conda and versions lines pass")
    out = json.loads(found)
    return [_verdict("slime-flags", "slime train.py", got=out["slime"], n=len(slime),
                     where=f"MEGATRON_DIR={ctx.cfg.MEGATRON_DIR}, SLIME_DIR={ctx.cfg.SLIME_DIR}"),
            _verdict("sglang-flags", "the eval server (sglang.launch_server)", got=out["sglang"], n=len(sglang),
                     where=f"SLIME_ENV={ctx.cfg.SLIME_ENV}")]


def _verdict(name: str, program: str, got: dict, n: int, where: str) -> Result:
    if "error" in got:
        return result(name, FAIL, f"cannot build {program}'s parser from the installed code ({where}): {got['error']}",
                      fix="import it by hand in the activated slime env (python3 -c 'import slime, megatron, sglang') "
                      "and fix what it says")
    unknown = got["unknown"]
    if unknown:
        return result(name, FAIL, f"{program} does not know {len(unknown)} flag(s) of this plan: {', '.join(unknown)} "
                                  f"({where}; slime would ignore them silently)",
                      fix="the installed slime/Megatron/SGLang differ from the pinned ones the toolkit was checked "
                      "against (pyhelpers/launch/slime_flags.py): restore the pinned versions (env/slime.lock)", details=unknown)
    return result(name, PASS, f"every flag of the plan ({n} arguments) is known to the installed {program} ({where})")
