"""Decisions inside single stages that bash acts on: the export plan, the disk guard, stage
records. Records (stages/<stage>.done) add detail for humans; the artifacts decide (runstate)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from pyhelpers.errors import ToolkitError
from pyhelpers.jsonfiles import write_json_atomic
from pyhelpers.run import checkpoints as ck
from pyhelpers.run.layout import RunLayout


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
    staging = lay.hf_staging(it)
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
    target, staging = lay.hf_dir(it), lay.hf_staging(it)
    if staging.exists():
        problems = ck.hf_problems(staging)
        if problems:
            raise ToolkitError(f"the converter's output is incomplete: {problems[0]}", str(staging),
                               "see logs/convert.log; the checkpoint is untouched, run `make resume` to retry")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    problems = ck.hf_problems(target)
    if problems:
        raise ToolkitError(f"HF export incomplete: {problems[0]}", str(target), "run `make resume` to retry")
    ck.flip_hf(lay.hf_link, target)
    return target, ck.remove_old_exports(lay.save_dir, target)


def run_export(cfg, lay: RunLayout, r: int, log_path: Path, progress=lambda s: None) -> tuple[Path, list[Path]]:
    """The export stage: plan; when slime's --save-hf did not already write a complete hf-<iter>/,
    the disk guard, then CONVERT_TO_HF in the slime env as the recorded service `convert` (a killed
    loop leaves it recorded, so `make resume` stops it before a second one could write the same
    staging dir); verify, flip `hf`, remove older exports. The checkpoint is only read."""
    from pyhelpers.capacity import diskguard
    from pyhelpers.launch import slime_args as launch_args
    from pyhelpers.procs import groups as procs
    from pyhelpers.run import events

    plan = export_plan(lay, r)
    if plan.action == "convert":
        progress("disk: " + diskguard.check(cfg, lay, "export").explain())
        argv = launch_args.slime_tool(cfg, "CONVERT_TO_HF", "--input-dir", str(plan.source),
                                      "--output-dir", str(plan.staging), "--origin-hf-dir", str(cfg.path("HF_MODEL")))
        progress(f"converting {plan.source.name} to HF weights (log: {log_path})")
        events.append(lay.run_dir, "convert-start", round=r, iteration=plan.iteration)
        _, child = procs.spawn(log_path.stem, argv, lay.pids, lay.logs)
        try:
            status = child.wait()
        finally:
            procs.stop_all(lay.pids, cfg.float("STOP_GRACE"), names=[log_path.stem])
        events.append(lay.run_dir, "convert-end", round=r, iteration=plan.iteration, status=status)
        if status != 0:
            tail = "\n".join(procs.log_tail(log_path, 20))
            raise ToolkitError(f"HF conversion of {plan.source.name} failed (exit {status})",
                               f"{log_path}; last lines:\n{tail}\n",
                               "the checkpoint is untouched; fix the cause, then `make resume`")
    target, removed = finish_export(lay, r)
    write_record(lay, r, "export", "ok", target=target, converted=plan.action == "convert")
    return target, removed
