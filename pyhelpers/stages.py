"""Decisions inside single stages that bash acts on: the export plan, the disk guard, stage
records. Records (stages/<stage>.done) add detail for humans; the artifacts decide (runstate)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from . import checkpoints as ck
from .errors import ToolkitError
from .jsonfiles import write_json_atomic
from .runlayout import RunLayout


def write_record(lay: RunLayout, r: int, stage: str, status: str, **details) -> Path:
    """A stage record: inputs/outputs/status, paths relative to the run's roots, no secrets."""
    def rel(v):
        if isinstance(v, Path):
            for root, name in ((lay.run_dir, "RUN_DIR"), (lay.save_dir, "SAVE_DIR")):
                try:
                    return f"${name}/{v.resolve().relative_to(root.resolve())}"
                except ValueError:
                    pass
            return v.name
        return v

    path = lay.stage_record(r, stage)
    write_json_atomic(path, {"round": r, "stage": stage, "status": status,
                             **{k: rel(v) for k, v in sorted(details.items())}})
    return path


@dataclass(frozen=True)
class ExportPlan:
    action: str  # "flip" (slime's --save-hf export is complete) or "convert"
    iteration: int
    source: Path  # the iter_* dir a conversion reads
    target: Path  # hf-<iter>
    staging: Path  # where a conversion writes before the rename



def export_plan(lay: RunLayout, r: int) -> ExportPlan:
    it = lay.last_iteration(r)
    source = ck.iter_dirs(lay.megatron).get(it)
    if source is None or not ck.is_complete(source):
        raise ToolkitError(f"round {r}'s checkpoint iter_{it:07d} is missing or incomplete", str(lay.megatron),
                           "the train stage must finish first: run `make resume`")
    target = lay.hf_dir(it)
    staging = lay.save_dir / f".hf-{it:07d}.partial"
    if target.is_dir() and not ck.hf_problems(target):
        return ExportPlan("flip", it, source, target, staging)
    if target.exists():
        # An incomplete export (crash mid-write): move it aside, the converter rewrites it.
        shutil.rmtree(target)
    if staging.exists():
        shutil.rmtree(staging)
    return ExportPlan("convert", it, source, target, staging)


def finish_export(lay: RunLayout, r: int) -> tuple[Path, list[Path]]:
    """After the converter wrote the staging dir (or slime's --save-hf wrote hf-<iter>): verify,
    rename into place, flip `hf` atomically, remove older exports. Returns (target, removed)."""
    it = lay.last_iteration(r)
    target, staging = lay.hf_dir(it), lay.save_dir / f".hf-{it:07d}.partial"
    if staging.exists():
        problems = ck.hf_problems(staging)
        if problems:
            raise ToolkitError(f"the converter's output is incomplete: {problems[0]}", str(staging),
                               "see logs/export.log; the checkpoint is untouched, run `make resume` to retry")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    problems = ck.hf_problems(target)
    if problems:
        raise ToolkitError(f"HF export incomplete: {problems[0]}", str(target), "run `make resume` to retry")
    ck.flip_hf(lay.hf_link, target)
    return target, ck.remove_old_exports(lay.save_dir, target)
