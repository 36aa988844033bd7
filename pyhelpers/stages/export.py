"""The export stage of round r: the round's final checkpoint as HF weights, `hf` flipped atomically.

When slime's --save-hf already wrote hf-<iter>/ (SAVE_HF=1), it is completed from HF_MODEL by hard
links and verified (run/hf_complete.py), then only the flip; otherwise CONVERT_TO_HF
runs in the slime env as the recorded service `convert` (a killed loop leaves it recorded, so
`make resume` stops it before a second one could write the same staging dir), then the output is
verified, renamed into place, `hf` flipped, older exports removed. The checkpoint is only read.
"""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pyhelpers.capacity import diskguard
from pyhelpers.config.load import Config
from pyhelpers.errors import ToolkitError
from pyhelpers.launch import slime_args
from pyhelpers.procs import groups
from pyhelpers.run import checkpoints, events, hf_complete
from pyhelpers.run.layout import RunLayout
from pyhelpers.run.records import write_record
from pyhelpers.stages import inputs

if TYPE_CHECKING:
    from pyhelpers.stages.context import StageContext

LOG = "convert.log"  # the converter's log (its stem is the recorded service's name)
COLOUR = "#6a1b9a"
GPU_PHASE = "hf-export"  # run/gpu_time.py: the converter (or --save-hf's completion) holds the GPUs idle
WRITES = diskguard.hf_export_writes


def reads(lay: RunLayout, r: int, seed_bank: Path | None) -> list[inputs.RunInput]:
    return inputs.bank_and_analyst(lay, r, seed_bank)


def launches(cfg: Config, lay: RunLayout, r: int, model_args: list[str]) -> list[tuple[str, str, str]]:
    return [("convert", shlex.join(convert_argv(cfg, lay, lay.last_iteration(r))),
             "skipped when slime's --save-hf wrote the export" if cfg.SAVE_HF else "")]


def done(lay: RunLayout, r: int, rounds: int) -> tuple[bool, str]:
    want = lay.hf_dir(lay.last_iteration(r)).resolve()
    target = checkpoints.hf_target(lay.hf_link)
    if target != want:
        return False, f"hf points at {target.name if target else 'nothing'}; needs {want.name}"
    problems = checkpoints.hf_problems(want)
    if problems:
        return False, f"{want.name} incomplete: {problems[0]}"
    left = checkpoints.old_exports(lay.save_dir, want)
    if left:  # a kill between the flip and the cleanup: the stage finishes by removing them
        return False, f"hf -> {want.name}; {len(left)} older export(s) to remove ({left[0].name})"
    return True, f"hf -> {want.name}"


# slime's converter copies the weights its Megatron model does not hold (Qwen3.5's visual tower)
# from --origin-hf-dir only with this flag (slime 624b824, tools/convert_torch_dist_to_hf.py:192-194).
CONVERTER_FLAGS = ("--add-missing-from-origin-hf",)


@dataclass(frozen=True)
class ExportChoice:
    action: str  # "flip" (slime's --save-hf export is complete) or "convert"
    iteration: int
    source: Path  # the iter_* dir a conversion reads
    target: Path  # hf-<iter>
    staging: Path  # where a conversion writes before the rename


def prepare_export(lay: RunLayout, r: int, origin: Path | None = None, save_hf: bool = False,
                   say=lambda s: None) -> ExportChoice:
    """Flip or convert? Flip an export slime's --save-hf already wrote when it is complete (with
    every weight of `origin`, the base HF model) -- with save_hf (SAVE_HF=1), after completing it
    from `origin` by hard links and checking it name by name and shape by shape (run/hf_complete.py).
    A convert first REMOVES what a crashed export left (an incomplete hf-<iter>/, the staging dir):
    the converter rewrites both."""
    it = lay.last_iteration(r)
    source = checkpoints.iter_dirs(lay.megatron).get(it)
    if source is None or not checkpoints.is_complete(source):
        raise ToolkitError(f"round {r}'s checkpoint iter_{it:07d} is missing or incomplete", str(lay.megatron),
                           "the train stage must finish first: run `make resume`")
    target = lay.hf_dir(it)
    staging = lay.hf_staging(it)
    if save_hf and origin is not None and target.is_dir() and not checkpoints.hf_problems(target):
        ok, why = hf_complete.complete(target, origin)
        say(why if ok else f"{why}; converting instead")
        if ok:
            return ExportChoice("flip", it, source=source, target=target, staging=staging)
    elif target.is_dir() and not checkpoints.hf_problems(target, origin):
        return ExportChoice("flip", it, source=source, target=target, staging=staging)
    if target.exists():
        shutil.rmtree(target)
    if staging.exists():
        shutil.rmtree(staging)
    return ExportChoice("convert", it, source=source, target=target, staging=staging)


def finish_export(lay: RunLayout, r: int, origin: Path | None = None) -> tuple[Path, list[Path]]:
    """After the converter wrote the staging dir (or slime's --save-hf wrote hf-<iter>): verify
    (complete, with every weight name of `origin`, and -- for a conversion -- having copied from
    `origin` only what the trained model does not hold), rename into place, flip `hf` atomically,
    remove older exports. Returns (target, removed)."""
    it = lay.last_iteration(r)
    target, staging = lay.hf_dir(it), lay.hf_staging(it)
    if staging.exists():
        problems = checkpoints.hf_problems(staging, origin)
        if origin is not None and not problems:
            problems = checkpoints.origin_copy_problems(converter_added(lay, staging), origin)
        if problems:
            raise ToolkitError(f"the converter's output is incomplete: {problems[0]}", str(staging),
                               "see logs/convert.log; the checkpoint is untouched, run `make resume` to retry")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    problems = checkpoints.hf_problems(target, origin)
    if problems:
        raise ToolkitError(f"HF export incomplete: {problems[0]}", str(target), "run `make resume` to retry")
    checkpoints.flip_hf(lay.hf_link, target)
    return target, checkpoints.remove_old_exports(lay.save_dir, target)


def converter_added(lay: RunLayout, staging: Path) -> set[str] | None:
    """What the last converter run into `staging` reported copying from the original HF dir, from
    its section of logs/convert.log (procs.spawn appends each run after a "==> ... start convert:"
    line naming its argv). None when no run into `staging` is logged."""
    try:
        text = (lay.logs / LOG).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None
    runs = [part for part in ("\n" + text).split("\n==> ")[1:]
            if part.split("\n", 1)[0].find(f"--output-dir {staging}") >= 0]
    return checkpoints.added_from_origin(runs[-1]) if runs else None


def convert_argv(cfg: Config, lay: RunLayout, iteration: int) -> list[str]:
    """CONVERT_TO_HF on checkpoint iter_<iteration> into its staging dir (export(); make plan)."""
    return slime_args.slime_tool(cfg, "CONVERT_TO_HF", "--input-dir", str(lay.megatron / f"iter_{iteration:07d}"),
                                  "--output-dir", str(lay.hf_staging(iteration)), "--origin-hf-dir",
                                  str(cfg.HF_MODEL), *CONVERTER_FLAGS)


def export(cfg: Config, lay: RunLayout, r: int, *, progress=lambda s: None) -> tuple[Path, list[Path]]:
    """The stage's work (see the module doc). Returns (target, removed exports)."""
    log_path = lay.logs / LOG
    origin = cfg.HF_MODEL
    choice = prepare_export(lay, r, origin, save_hf=cfg.SAVE_HF, say=progress)
    if choice.action == "convert":
        progress("disk: " + diskguard.check(cfg, lay, "export", WRITES).explain())
        argv = convert_argv(cfg, lay, choice.iteration)
        progress(f"converting {choice.source.name} to HF weights (log: {log_path})")
        events.append(lay.run_dir, "convert-start", round=r, iteration=choice.iteration)
        _, child = groups.spawn(log_path.stem, argv, pids_dir=lay.pids, logs_dir=lay.logs)
        try:
            status = child.wait()
        finally:
            groups.stop_all(lay.pids, cfg.STOP_GRACE, names=[log_path.stem])
        events.append(lay.run_dir, "convert-end", round=r, iteration=choice.iteration, status=status)
        if status != 0:
            tail = "\n".join(groups.log_tail(log_path, 20))
            raise ToolkitError(f"HF conversion of {choice.source.name} failed (exit {status})",
                               f"{log_path}; last lines:\n{tail}\n",
                               "the checkpoint is untouched; fix the cause, then `make resume`")
    target, removed = finish_export(lay, r, origin)
    write_record(lay, r, "export", target=target, converted=choice.action == "convert")
    return target, removed


def run(loop: StageContext, r: int) -> None:
    target, removed = export(loop.cfg, loop.lay, r, progress=loop.echo)
    loop.echo(f"hf -> {target.name}" + (f" (removed {', '.join(p.name for p in removed)})" if removed else ""))
