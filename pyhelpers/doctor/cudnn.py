"""cuDNN (M4): the project's activate.d hook is installed in the slime env, and after a real
activation torch uses pip's cuDNN wheel, not the system cuDNN 9.8.

What is compared: LD_LIBRARY_PATH's first entry and CUDNN_PATH (TransformerEngine looks there
before LD_LIBRARY_PATH) against the wheel's dir; torch.backends.cudnn.version() against the
wheel's version (cuDNN 9 encodes major*10000 + minor*100 + patch, e.g. 9.17.0 -> 91700); and the
libcudnn files mapped into the process (/proc/self/maps) when torch has loaded any.
"""

from __future__ import annotations

import os
from pathlib import Path

from pyhelpers.config.declarations import PROJECT_ROOT
from pyhelpers.doctor.base import FAIL, PASS, WARN, Context, Result, result
from pyhelpers.doctor.conda import env_prefix, slime_probe
from pyhelpers.doctor.slime_probe import CUDNN_DISTS

HOOK = "cudnn_ldpath.sh"
INSTALL = "make install-hooks"


def version_code(version: str) -> int | None:
    """'9.17.0.29' -> 91700; '8.9.2.26' -> 8902 (cuDNN 8 used major*1000)."""
    try:
        major, minor, patch = (int(x) for x in version.split(".")[:3])
    except ValueError:
        return None
    return major * (10000 if major >= 9 else 1000) + minor * 100 + patch


def _same(a: str | None, b: str | None) -> bool:
    return bool(a and b) and os.path.realpath(a) == os.path.realpath(b)


def hook_state(ctx: Context) -> tuple[str, str]:
    """('ok'|'missing'|'different', text) for the activate.d and deactivate.d hooks."""
    prefix = env_prefix(ctx, "SLIME_ENV") / "etc" / "conda"
    states = []
    for kind in ("activate.d", "deactivate.d"):
        ours = (PROJECT_ROOT / "env" / kind / HOOK).read_bytes()
        theirs = prefix / kind / HOOK
        if not theirs.is_file():
            states.append(("missing", f"{theirs} is missing"))
        elif theirs.read_bytes() != ours:
            states.append(("different", f"{theirs} is not the project's version"))
    if not states:
        return "ok", f"hooks installed in {prefix}"
    worst = "missing" if any(s == "missing" for s, _ in states) else "different"
    return worst, "; ".join(t for _, t in states)


def check_cudnn(ctx: Context) -> list[Result]:
    state, hooks = hook_state(ctx)
    if not (env_prefix(ctx, "SLIME_ENV") / "etc" / "conda" / "activate.d" / HOOK).is_file():
        return [result("cudnn", FAIL, f"cuDNN hook not installed: {hooks}",
                       fix=f"{INSTALL} (copies env/activate.d and env/deactivate.d/{HOOK} into the env)")]
    probe = slime_probe(ctx)
    env, torch = probe.get("env") or {}, probe.get("torch") or {}
    wheel_dir = probe.get("cudnn_dir")
    wheel = next(((d, v) for d in CUDNN_DISTS if (v := (probe.get("dists") or {}).get(d))), None)
    if not wheel_dir or not wheel:
        return [result("cudnn", FAIL, "pip's cuDNN wheel not found in the slime env (no nvidia/cudnn package)",
                       fix="pip install 'nvidia-cudnn-cu12==9.17.*' inside the activated slime env (env/slime.lock)")]
    lib_dir = str(Path(wheel_dir) / "lib")
    first = (env.get("LD_LIBRARY_PATH") or "").split(":")[0]
    problems = []
    if not _same(first, lib_dir):
        problems.append(f"LD_LIBRARY_PATH starts with {first or '(empty)'!r}, not {lib_dir}")
    if not _same(env.get("CUDNN_PATH"), wheel_dir):
        problems.append(f"CUDNN_PATH={env.get('CUDNN_PATH') or '(unset)'}, not {wheel_dir} "
                        "(TransformerEngine would load another cuDNN)")
    want = version_code(wheel[1])
    got = torch.get("cudnn")
    if torch.get("error"):
        problems.append(torch["error"])
    elif torch.get("cudnn_error"):
        problems.append(f"torch.backends.cudnn.version() failed: {torch['cudnn_error']}")
    elif got != want:
        problems.append(f"torch uses cuDNN {got}, the pip wheel {wheel[0]} {wheel[1]} is {want}")
    foreign = [p for p in torch.get("cudnn_mapped") or [] if not _same(os.path.dirname(p), lib_dir)]
    if foreign:
        problems.append("torch loaded " + ", ".join(foreign) + f" instead of {lib_dir}")
    details = [hooks, f"wheel {wheel[0]} {wheel[1]} at {wheel_dir}"]
    if problems:
        fix = INSTALL if state != "ok" else (
            f"{INSTALL} again, then check by hand: conda activate {ctx.cfg.SLIME_ENV}; echo $LD_LIBRARY_PATH")
        return [result("cudnn", FAIL, "; ".join(problems), fix=fix + " (another activate.d script may reorder "
                       "LD_LIBRARY_PATH after ours)", details=details)]
    found = (f"LD_LIBRARY_PATH starts with {lib_dir}; CUDNN_PATH set; torch cuDNN {got} = "
             f"{wheel[0]} {wheel[1]}")
    if state != "ok":
        return [result("cudnn", WARN, f"{found}; but {hooks}", fix=f"{INSTALL} (keeps a .orig copy of yours)", details=details)]
    return [result("cudnn", PASS, found, details=details)]
