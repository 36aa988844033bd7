"""Versions inside the activated slime env against SLIME_LOCK (env/slime.lock, M5)."""

from __future__ import annotations

from pyhelpers.doctor import lockfile
from pyhelpers.doctor.base import FAIL, PASS, WARN, Context, Result, result
from pyhelpers.doctor.conda import slime_probe

REINSTALL = ("restore the system image with the pinned env (M18), or reinstall the locked versions into "
             "the slime env (env/conda/slime.yml); if the new versions are intended, update SLIME_LOCK={lock}")


def found_versions(probe: dict, lock: dict[str, str]) -> dict[str, str | None]:
    """What the probe found for each lock entry (torch from torch.__version__ when imported)."""
    out: dict[str, str | None] = {}
    torch = probe.get("torch") or {}
    for name in lock:
        if name == "python":
            out[name] = probe.get("python")
        elif name == "cuda-toolkit":
            out[name] = (probe.get("nvcc") or {}).get("version")
        elif name == "torch" and torch.get("version"):
            out[name] = torch["version"]
        else:
            out[name] = (probe.get("dists") or {}).get(name)
    return out


def check_versions(ctx: Context) -> list[Result]:
    lock_path = ctx.cfg.SLIME_LOCK
    lock = lockfile.read_lock(lock_path)
    probe = slime_probe(ctx)
    found = found_versions(probe, lock)
    torch = probe.get("torch") or {}
    bad, warn, shown = [], [], []
    for name, want in lock.items():
        got = found[name]
        label = f"{name} {got or 'missing'}"
        if name == "torch" and torch.get("cuda"):
            label += f" (CUDA {torch['cuda']})"
        shown.append(label)
        if lockfile.matches(got, want):
            continue
        if name == "cuda-toolkit" and not got:
            warn.append("nvcc not found in the activated env (CUDA toolkit "
                        f"{want} is needed only to rebuild TE/apex; cuobjdump comes with it)")
        else:
            bad.append(f"{name} {got or 'not installed'} (lock: {want})")
    if name_err := torch.get("error"):
        bad.append(name_err)
    details = [f"lock {lock_path}: " + ", ".join(f"{k} {v}" for k, v in lock.items()),
               f"interpreter: {probe.get('executable')}"] + warn
    if bad:
        return [result("versions", FAIL, "differs from the lock: " + "; ".join(bad),
                       fix=REINSTALL.format(lock=ctx.cfg.SLIME_LOCK), details=details)]
    status = WARN if warn else PASS
    return [result("versions", status, ", ".join(shown) + (" (match the lock)" if not warn else ""),
                   fix="install the CUDA toolkit 12.8 into the slime env (env/conda/slime.yml)" if warn else "",
                   details=details)]
