"""Keeping rehearsals and real runs apart (architecture §9).

A rehearsal (`make rehearse`) runs on stand-ins, under its own RUN_NAME, with a scratch
TRAIN_SAVE. It marks its outputs: run.json says `"rehearsal": true` and TRAIN_SAVE/<RUN_NAME>/
holds a REHEARSAL file. These rules keep the two apart:

- a rehearsal refuses a TRAIN_SAVE that holds a real checkpoint (a megatron/ checkpoint of any run
  without the REHEARSAL marker): its scratch files must never sit beside real weights;
- a rehearsal refuses a RUN_NAME whose run.json belongs to a real run, and a real run refuses a
  RUN_NAME whose run.json says rehearsal (its "checkpoints" are stand-in bytes);
- `fresh()` (each `make rehearse` starts clean) deletes only what is marked as a rehearsal, and
  bin/train calls it only once the rehearsal's preflight passed.

The rehearsal replaces SEED_BANK, TRAIN_TASKS and VAL_TASKS with stand-ins (tests/fakes/rehearsal.py
says so when it starts). So that a bad file still fails the rehearsal rather than the real run,
`user_inputs()` checks the user's own files first, with the doctor's checks.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pyhelpers.config.load import Config
from pyhelpers.errors import ToolkitError
from pyhelpers.run import checkpoints
from pyhelpers.run.layout import RunLayout

MARKER = "REHEARSAL"


def is_rehearsal(lay: RunLayout) -> bool | None:
    """True/False from run.json, None when the run was never started."""
    try:
        return bool(json.loads(lay.manifest.read_text(encoding="utf-8")).get("rehearsal"))
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise ToolkitError(f"run.json is unreadable ({exc})", str(lay.manifest),
                           "restore it from a backup, or use another RUN_NAME") from None


def _real_checkpoints(train_save: Path) -> list[Path]:
    if not train_save.is_dir():
        return []
    out = []
    for run in sorted(p for p in train_save.iterdir() if p.is_dir()):
        megatron = run / "megatron"
        has_ckpt = (megatron / checkpoints.TRACKER).is_file() or bool(checkpoints.iter_dirs(megatron))
        if has_ckpt and not (run / MARKER).is_file():
            out.append(run)
    return out


def guard(lay: RunLayout, rehearsal: bool) -> None:
    """Refuse to mix a rehearsal with real weights or a real run (see the module doc)."""
    recorded = is_rehearsal(lay)
    if rehearsal:
        real = _real_checkpoints(lay.save_dir.parent)
        if real:
            raise ToolkitError(f"refusing to rehearse in a TRAIN_SAVE that holds real checkpoints: "
                               f"{', '.join(p.name for p in real)}", str(lay.save_dir.parent),
                               "leave TRAIN_SAVE unset for `make rehearse` (it uses a scratch dir), or point "
                               "it at an empty directory")
        if recorded is False:
            raise ToolkitError(f"RUN_NAME={lay.run_dir.name} is a real run, not a rehearsal", str(lay.manifest),
                               "give the rehearsal its own RUN_NAME (default: rehearsal)")
    elif recorded:
        raise ToolkitError(f"RUN_NAME={lay.run_dir.name} is a rehearsal (stand-in checkpoints)", str(lay.manifest),
                           "start the real run under another RUN_NAME, or delete the rehearsal's directories")


def mark(lay: RunLayout) -> None:
    lay.save_dir.mkdir(parents=True, exist_ok=True)
    (lay.save_dir / MARKER).write_text("Written by `make rehearse`: stand-in checkpoints, safe to delete.\n")


def fresh(lay: RunLayout, dry_run: bool = False) -> list[Path]:
    """Delete the previous rehearsal of this RUN_NAME (only what is marked as one); dry_run: only
    refuse what it would refuse, changing nothing (before the driver takes the lock, which creates
    the run's directory). Its lock file stays: the driver calling this holds the flock on it,
    which a new file would not carry."""
    removed = []
    guard(lay, rehearsal=True)
    if lay.save_dir.exists() and not (lay.save_dir / MARKER).is_file() and any(lay.save_dir.iterdir()):
        raise ToolkitError("the rehearsal's TRAIN_SAVE directory holds files it did not write", str(lay.save_dir),
                           "move them away or point TRAIN_SAVE elsewhere; nothing was deleted")
    if dry_run:
        return removed
    if is_rehearsal(lay):
        for p in lay.run_dir.iterdir():
            if p != lay.lock:
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        removed.append(lay.run_dir)
    if (lay.save_dir / MARKER).is_file():
        shutil.rmtree(lay.save_dir)
        removed.append(lay.save_dir)
    return removed


TASK_CHECKS = (("TRAIN_TASKS", "train-tasks"), ("VAL_TASKS", "val-tasks"))


def user_inputs(cfg: Config, environ) -> tuple[list, list[str]]:
    """(doctor results, notes) for the user's SEED_BANK and task files, before the rehearsal's
    stand-ins replace them. A task file that does not exist yet is a note (a rehearsal may come
    before `pyhelpers data build`); a SEED_BANK that is set must exist and be a valid bank."""
    notes = [f"{knob}={cfg.path(knob)} does not exist yet: the real run needs it (pyhelpers data build)"
             for knob, _ in TASK_CHECKS if not cfg.path(knob).is_file()]
    only = ["run-files"] + [name for knob, name in TASK_CHECKS if cfg.path(knob).is_file()]
    from pyhelpers.doctor.runner import run_checks  # heavy (~0.15 s): only for the preflight

    return run_checks(cfg, environ, "rehearse", only=only, fresh_run=True), notes
