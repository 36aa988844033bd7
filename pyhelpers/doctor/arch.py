"""Architecture (M5): the sm_XX that TE's and apex's built libraries contain, versus the GPUs'.

`cuobjdump --list-elf LIB` prints lines like `ELF file    1: libk80.1.sm_80.cubin`, `--list-ptx`
lines like `PTX file    1: libk8090.1.sm_90.ptx`; a file without device code makes cuobjdump exit
255 ("does not contain device code"), e.g. TE's host-only torch binding
(docs/gpu_tool_outputs.md).

Why this matters: on an H200 an sm_80-only kernel neither ran nor raised: the call returned 0.0
instead of 32.0 because the launch error was not checked (gpu-samples/README.md). A TE/apex built
for the A800 can fail loudly ("no kernel image is available for execution on the device") or,
in code that does not check launches, silently compute garbage.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from pyhelpers.doctor.base import FAIL, PASS, WARN, CheckError, Context, Result, result, tail
from pyhelpers.doctor.conda import env_prefix, slime_probe
from pyhelpers.doctor.gpus import used_gpus

_ELF = re.compile(r"^ELF file\s+\d+:\s*\S*?\.(sm_\d+[af]?)\.cubin\s*$", re.M)
_PTX = re.compile(r"^PTX file\s+\d+:\s*\S*?\.(sm_\d+[af]?)\.ptx\s*$", re.M)
SILENT = ("a library without the GPU's sm_XX can fail loudly ('no kernel image is available for execution "
          "on the device') or silently: an sm_80-only kernel on an H200 computed nothing and raised nothing "
          "(docs/gpu_tool_outputs.md)")


def _num(sm: str) -> int:
    return int(re.sub(r"\D", "", sm))


def resolve_cuobjdump(ctx: Context) -> str:
    exe = ctx.cfg.CUOBJDUMP
    fix = "set CUOBJDUMP=/path/to/cuobjdump (it ships with the CUDA toolkit, e.g. /usr/local/cuda/bin/cuobjdump)"
    if "/" in exe:
        if os.path.isfile(exe) and os.access(exe, os.X_OK):
            return exe
        raise CheckError(f"cuobjdump not found: CUOBJDUMP={exe} is not an executable file", fix)
    for path in (ctx.environ.get("PATH"), str(env_prefix(ctx, "SLIME_ENV") / "bin"), "/usr/local/cuda/bin"):
        found = shutil.which(exe, path=path)
        if found:
            return found
    raise CheckError(f"cuobjdump not found (CUOBJDUMP={exe}; also looked in the slime env and /usr/local/cuda/bin)",
                     fix)


def archs(ctx: Context, exe: str, lib: str) -> tuple[set[str], set[str]] | None:
    """(cubin sm_XX set, PTX sm_XX set) of lib, or None when it holds no device code."""
    elf = ctx.run([exe, "--list-elf", lib], timeout=120)
    text = elf.stdout + elf.stderr
    if "does not contain device code" in text:
        return None
    if elf.returncode != 0:
        raise CheckError(f"{exe} --list-elf {lib} failed (exit {elf.returncode}): {tail(text)}",
                         f"run `{exe} --list-elf {lib}` by hand; reinstall the library if it is damaged")
    ptx = ctx.run([exe, "--list-ptx", lib], timeout=120)
    return set(_ELF.findall(text)), set(_PTX.findall(ptx.stdout + ptx.stderr))


def verdict(sm: str, cubins: set[str], ptx: set[str]) -> tuple[str, str]:
    """('ok'|'compat'|'ptx'|'missing', text) for one library on a GPU of architecture sm."""
    have = ", ".join(sorted(cubins | {f"{p} PTX" for p in ptx}, key=lambda s: (_num(s), s))) or "none"
    g = _num(sm)
    if sm in cubins:
        return "ok", have
    # A cubin runs on the same major architecture with an equal or higher minor (not 'a'/'f' ones).
    same_major = [c for c in cubins if c[-1].isdigit() and _num(c) // 10 == g // 10 and _num(c) <= g]
    if same_major:
        return "compat", f"{have} (no {sm} cubin; {max(same_major, key=_num)} runs by binary compatibility, " \
                         f"kernels specific to {sm} are missing)"
    if any(p[-1].isdigit() and _num(p) <= g for p in ptx):
        return "ptx", f"{have} (no {sm} cubin; PTX is JIT-compiled at first launch: slow, and arch-specific paths may fail)"
    return "missing", f"{have} (no code for {sm})"


def check_arch(ctx: Context) -> list[Result]:
    gpus = used_gpus(ctx)
    probe = slime_probe(ctx)
    exe = resolve_cuobjdump(ctx)
    sms = sorted({g.sm for g in gpus}, key=_num)
    libs = [("TE", p) for p in probe.get("te_libs") or []] + [("apex", p) for p in probe.get("apex_libs") or []]
    if not any(kind == "TE" for kind, _ in libs):
        return [result("arch", FAIL, "no TransformerEngine library found in the slime env",
                       fix="install transformer-engine 2.16.1 into the slime env (env/conda/slime.yml)")]
    worst, lines, with_code = "ok", [], set()
    rank = {"ok": 0, "compat": 1, "ptx": 1, "missing": 2}
    for kind, lib in libs:
        got = archs(ctx, exe, lib)
        if got is None:
            lines.append(f"{kind} {Path(lib).name}: no device code (host-only), not checked")
            continue
        with_code.add(kind)
        for sm in sms:
            state, text = verdict(sm, *got)
            worst = max(worst, state, key=rank.__getitem__)
            lines.append(f"{kind} {Path(lib).name} on {sm}: {text}")
    gpu_sm = "/".join(sms)
    nvte = ";".join(str(_num(s)) for s in sms)
    torch_list = ";".join(f"{_num(s) // 10}.{_num(s) % 10}" for s in sms)
    rebuild = (f"rebuild inside the slime env for {gpu_sm}: TE with NVTE_CUDA_ARCHS={nvte} "
               f"(`NVTE_CUDA_ARCHS={nvte} pip install --no-build-isolation -v <TE 2.16.1 source>`), apex with "
               f"TORCH_CUDA_ARCH_LIST={torch_list} (`TORCH_CUDA_ARCH_LIST={torch_list} APEX_CPP_EXT=1 APEX_CUDA_EXT=1 "
               f"pip install --no-build-isolation -v <apex source>`); add 80 / 8.0 to keep the A800 (env/conda/slime.yml)")
    missing_kinds = [k for k in ("TE", "apex") if k not in with_code]
    if worst == "missing":
        return [result("arch", FAIL, f"TE/apex lack code for the GPU's {gpu_sm}", fix=rebuild, details=lines + [SILENT])]
    if worst != "ok":
        return [result("arch", WARN, f"TE/apex have no exact {gpu_sm} cubin (see details)", fix=rebuild, details=lines)]
    if missing_kinds:
        what = " and ".join(missing_kinds)
        return [result("arch", WARN, f"{gpu_sm} code found, but no {what} library with device code was found",
                       fix="install apex (its amp_C / fused_layer_norm_cuda extensions) into the slime env",
                       details=lines)]
    return [result("arch", PASS, f"TE and apex contain {gpu_sm} code for the GPUs in use", details=lines)]
