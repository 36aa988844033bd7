"""`make install-hooks`: copy env/{activate.d,deactivate.d}/cudnn_ldpath.sh into the slime env.

The only thing the toolkit ever writes into a user's conda env, and only on explicit request.
A different file of the same name (the user's own hook, M4) is kept as `<name>.orig` (once;
conda sources only *.sh, so the copy stays inactive).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from pyhelpers.config.declarations import PROJECT_ROOT
from pyhelpers.config.load import Config
from pyhelpers.errors import ToolkitError

HOOK = "cudnn_ldpath.sh"
KINDS = ("activate.d", "deactivate.d")


@dataclass(frozen=True)
class Step:
    src: Path
    dst: Path
    action: str  # "install" | "replace" | "up to date"

    def describe(self, dry_run: bool) -> str:
        verb = {"install": "copy", "replace": "copy (keeping the old file as .orig)",
                "up to date": "keep (up to date)"}[self.action]
        return f"{'would ' if dry_run else ''}{verb}: {self.src} -> {self.dst}"


def env_prefix(cfg: Config) -> Path:
    name = cfg.SLIME_ENV
    return Path(name) if "/" in name else cfg.CONDA_ROOT / "envs" / name


def plan(cfg: Config) -> list[Step]:
    prefix = env_prefix(cfg)
    if not (prefix / "conda-meta").is_dir():
        raise ToolkitError("conda env not found", f"{prefix} (SLIME_ENV={cfg.SLIME_ENV}, "
                           f"CONDA_ROOT={cfg.CONDA_ROOT})", "set CONDA_ROOT / SLIME_ENV to the slime env")
    steps = []
    for kind in KINDS:
        src, dst = PROJECT_ROOT / "env" / kind / HOOK, prefix / "etc" / "conda" / kind / HOOK
        if not dst.exists():
            action = "install"
        elif dst.read_bytes() == src.read_bytes():
            action = "up to date"
        else:
            action = "replace"
        steps.append(Step(src, dst, action))
    return steps


def apply(steps: list[Step]) -> None:
    for step in steps:
        if step.action == "up to date":
            continue
        step.dst.parent.mkdir(parents=True, exist_ok=True)
        orig = step.dst.with_name(step.dst.name + ".orig")
        if step.action == "replace" and not orig.exists():
            shutil.copy2(step.dst, orig)
        tmp = step.dst.with_name(step.dst.name + ".tmp")
        shutil.copyfile(step.src, tmp)
        tmp.chmod(0o644)
        tmp.replace(step.dst)
