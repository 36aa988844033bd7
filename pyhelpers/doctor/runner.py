"""The doctor's check list, the rehearse profile, and running every check without a crash escaping.

Order = the order a user fixes things in: toolchain (conda, versions, cuDNN), hardware (GPUs,
architecture), disks, secrets, inputs (models, data), services (ShopSimulator, Ray's ports, exposure),
NCCL's transport between nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from pyhelpers.config.load import Config
from pyhelpers.doctor import (
    arch,
    conda,
    cudnn,
    data,
    disks,
    envfile,
    flags,
    gpus,
    models,
    nccl_net,
    node_clocks,
    ray_ports,
    runfiles,
    shopsim,
    versions,
)
from pyhelpers.doctor.base import FAIL, SKIP, STATUSES, CheckError, Context, Result, result
from pyhelpers.errors import ToolkitError

Check = Callable[[Context], list[Result]]

# (family, names of the results it produces, function, prerequisites that must not have failed)
CHECKS: tuple[tuple[str, tuple[str, ...], Check, tuple[str, ...]], ...] = (
    ("conda", ("conda",), conda.check_conda, ()),
    ("versions", ("versions",), versions.check_versions, ("conda",)),
    ("cudnn", ("cudnn",), cudnn.check_cudnn, ("conda",)),
    ("flags", ("slime-flags", "sglang-flags"), flags.check_flags, ("conda",)),
    ("gpus", ("gpus",), gpus.check_gpus, ()),
    ("arch", ("arch",), arch.check_arch, ("conda", "gpus")),
    ("system-disk", ("system-disk",), disks.check_system_disk, ()),
    ("disk-space", ("disk-space",), disks.check_disk_space, ()),
    ("legacy-symlinks", ("legacy-symlinks",), disks.check_legacy_symlinks, ()),
    ("dotenv", ("dotenv",), envfile.check_dotenv, ()),
    ("secrets", ("secrets",), envfile.check_secrets, ()),
    ("models", ("model-hf", "model-config", "model-torch-dist"), models.check_models, ()),
    ("data", ("train-tasks", "val-tasks"), data.check_data, ()),
    ("run-files", ("run-files",), runfiles.check_run_files, ()),
    ("shopsim", ("shopsim-dir", "shopsim-retries", "shopsim-port"), shopsim.check_shopsim, ()),
    ("ray-ports", ("ray-ports",), ray_ports.check_ray_ports, ()),
    ("exposure", ("exposure",), shopsim.check_exposure, ()),
    ("nccl-net", ("nccl-net",), nccl_net.check_nccl_net, ()),
    ("node-clocks", ("node-clocks",), node_clocks.check_node_clocks, ()),
)
# What `make rehearse`'s stand-ins replace on a CPU machine (architecture §9).
REHEARSE_SKIPS = {
    "conda": "the conda stand-in replaces conda in a rehearsal",
    "versions": "the rehearsal does not use the slime env",
    "cudnn": "no cuDNN is loaded in a rehearsal",
    "flags": "the stand-in slime refuses any flag outside the pinned list when the job starts",
    "gpus": "the rehearsal runs on the CPU",
    "arch": "no GPU kernels run in a rehearsal",
    "system-disk": "a rehearsal writes only small stand-in files to its scratch TRAIN_SAVE",
}
NAMES = tuple(n for _, names, _, _ in CHECKS for n in names)


def _skips(ctx: Context) -> dict[str, str]:
    skips = {}
    if ctx.profile == "rehearse":
        skips.update({k: f"profile rehearse: {v}" for k, v in REHEARSE_SKIPS.items()})
    for name in (s.strip() for s in ctx.cfg.DOCTOR_SKIP.split(",")):
        if name:
            skips[name] = f"listed in DOCTOR_SKIP={ctx.cfg.DOCTOR_SKIP}"
    return skips


def run_one(ctx: Context, family: str, fn: Check) -> list[Result]:
    """A check's results; whatever it raises becomes one FAIL line that names the check."""
    try:
        return fn(ctx)
    except CheckError as exc:
        return [result(family, FAIL, exc.found, fix=exc.fix, details=exc.details)]
    except ToolkitError as exc:
        return [result(family, FAIL, f"{exc.what}: {exc.where}" if exc.where else exc.what, fix=exc.fix)]
    except Exception as exc:  # a bug in a check must not hide the others, nor print a traceback
        return [result(family, FAIL, f"the {family} check crashed: {type(exc).__name__}: {exc}",
                       fix=f"a bug in pyhelpers/doctor/{fn.__module__.rsplit('.', 1)[-1]}.py: report it with "
                       "this line; the other checks still ran")]


def run_checks(cfg: Config, environ: Mapping[str, str], profile: str = "full",
               only: Iterable[str] | None = None, fresh_run: bool = False) -> list[Result]:
    """Every check (or only the named ones: their families run, with their prerequisites'
    results taken into account only when those are named too), in the order of CHECKS.
    fresh_run: the run's files are about to be replaced (a fresh rehearsal): read as a new run."""
    ctx = Context(cfg, environ, profile, fresh_run=fresh_run)
    wanted = set(only) if only is not None else None
    skips = _skips(ctx)
    unknown = sorted(set(skips) - set(NAMES) - {f for f, *_ in CHECKS})
    out: list[Result] = []
    status: dict[str, str] = {}
    for family, names, fn, needs in CHECKS:
        if wanted is not None and not wanted & set(names):
            continue
        if family in skips or all(n in skips for n in names):
            out.append(result(family, SKIP, skips.get(family) or skips[names[0]],
                              fix="run `make doctor` without PROFILE=rehearse on the GPU machine"
                              if ctx.profile == "rehearse" and family in REHEARSE_SKIPS else ""))
            status[family] = SKIP
            continue
        failed = [n for n in needs if status.get(n) in (FAIL, SKIP)]
        if failed:
            out.append(result(family, SKIP, f"needs {' and '.join(failed)}, which did not pass",
                              fix=f"fix the {' / '.join(failed)} line(s) above, then run `make doctor` again"))
            status[family] = SKIP
            continue
        got = [r for r in run_one(ctx, family, fn) if r.name not in skips]
        status[family] = FAIL if any(r.status == FAIL for r in got) else "ok"
        out.extend(got)
    if unknown:
        out.append(result("doctor", FAIL, f"DOCTOR_SKIP names unknown check(s): {', '.join(unknown)}",
                          fix=f"remove {', '.join(unknown)} from DOCTOR_SKIP; its names: {', '.join(NAMES)}"))
    return out if wanted is None else [r for r in out if r.name in wanted]


def counts(results: list[Result]) -> dict[str, int]:
    return {s: sum(r.status == s for r in results) for s in STATUSES}
