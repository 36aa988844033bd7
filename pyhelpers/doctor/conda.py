"""Conda: the install (CONDA_ROOT), the two envs (M4, M6), and running code in an activated env.

Activation is done for real, as every bin/ script does it (`source conda.sh; conda activate
NAME`), so the env's activate.d hooks run: launching the env's python directly would skip them,
and with them the cuDNN 9.17 library path (M4).
"""

from __future__ import annotations

import json
from pathlib import Path

from pyhelpers.doctor import lockfile
from pyhelpers.doctor.base import FAIL, PASS, CheckError, Context, Result, result, tail
from pyhelpers.doctor.slime_probe import MARKER
from pyhelpers.errors import ToolkitError

PROBE_FILE = Path(__file__).with_name("slime_probe.py")
PROBE_TIMEOUT = 300  # importing a CUDA torch on a cold disk can take a while
# argv of `bash -c`: $1 = CONDA_ROOT, $2 = env, the rest is the command to exec once activated.
ACTIVATE = 'source "$1/etc/profile.d/conda.sh" && conda activate "$2" && shift 2 && exec "$@"'


def conda_sh(ctx: Context) -> Path:
    return ctx.cfg.CONDA_ROOT / "etc" / "profile.d" / "conda.sh"


def env_prefix(ctx: Context, knob: str) -> Path:
    """Prefix of the env named by knob (SLIME_ENV/SHOPSIM_ENV): a name under CONDA_ROOT/envs,
    or a path (conda activate accepts both)."""
    name = ctx.cfg[knob]
    return Path(name) if "/" in name else ctx.cfg.CONDA_ROOT / "envs" / name  # as hooks.env_prefix


def missing_env(ctx: Context, knob: str) -> str:
    """'' when conda.sh and the env exist; otherwise what is missing (one phrase)."""
    if not conda_sh(ctx).is_file():
        return f"no conda at CONDA_ROOT={ctx.cfg.CONDA_ROOT} ({conda_sh(ctx)} is missing)"
    prefix = env_prefix(ctx, knob)
    if not (prefix / "conda-meta").is_dir():
        return f"conda env {knob}={ctx.cfg[knob]} not found ({prefix}/conda-meta is missing)"
    return ""


def check_conda(ctx: Context) -> list[Result]:
    sh = conda_sh(ctx)
    if not sh.is_file():
        return [result("conda", FAIL, f"conda not found: {sh} is missing (CONDA_ROOT={ctx.cfg.CONDA_ROOT})",
                       fix="set CONDA_ROOT to your conda install (the dir holding etc/profile.d/conda.sh); "
                       "on a machine without the training image, `make rehearse` runs the whole run on stand-ins")]
    found, missing = [], []
    for knob, what in (("SLIME_ENV", "training, M4"), ("SHOPSIM_ENV", "ShopSimulator, M6")):
        prefix = env_prefix(ctx, knob)
        (found if (prefix / "conda-meta").is_dir() else missing).append(f"{knob}={ctx.cfg[knob]} ({what}): {prefix}")
    if missing:
        return [result("conda", FAIL, f"{sh} found; missing env(s): " + "; ".join(missing),
                       fix="restore the system image that holds the envs (M18), or create them from "
                       "env/conda/slime.yml and env/conda/shopsim.yml, or point SLIME_ENV/SHOPSIM_ENV at them",
                       details=found)]
    return [result("conda", PASS, f"{sh}; envs " + ", ".join(f.split(' (')[0] for f in found), details=found)]


def run_in_env(ctx: Context, knob: str, argv: list[str], stdin: str | None = None,
               timeout: float = PROBE_TIMEOUT):
    """Run argv inside the activated env (bash, conda.sh, conda activate, exec)."""
    cmd = ["bash", "-c", ACTIVATE, "doctor", str(ctx.cfg.CONDA_ROOT), ctx.cfg[knob], *argv]
    return ctx.run(cmd, timeout=timeout, stdin=stdin)


def _probe(ctx: Context) -> dict:
    why = missing_env(ctx, "SLIME_ENV")
    if why:
        raise CheckError(why, "fix the conda check first (CONDA_ROOT, SLIME_ENV)")
    try:
        dists = lockfile.dists(lockfile.read_lock(ctx.cfg.SLIME_LOCK))
    except ToolkitError:
        dists = ()  # the versions check reports the unreadable lock
    proc = run_in_env(ctx, "SLIME_ENV", ["python3", "-", *dists], stdin=PROBE_FILE.read_text(encoding="utf-8"))
    for line in proc.stdout.splitlines():
        if line.startswith(MARKER):
            try:
                return json.loads(line[len(MARKER):])
            except json.JSONDecodeError:
                break
    raise CheckError(
        f"could not run python3 in the activated env SLIME_ENV={ctx.cfg.SLIME_ENV} "
        f"(exit {proc.returncode}): {tail(proc.stderr or proc.stdout) or 'no output'}",
        f"try it by hand: source {conda_sh(ctx)} && conda activate {ctx.cfg.SLIME_ENV} && python3 -V")


def slime_probe(ctx: Context) -> dict:
    """What the activated slime env contains (slime_probe.py's JSON), computed once per run."""
    return ctx.cached("slime_probe", lambda: _probe(ctx))
