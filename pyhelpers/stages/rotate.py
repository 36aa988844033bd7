"""The rotate stage of round r: keep only the newest complete Megatron save (run/checkpoints.py)
and the rollout state files that belong to it; older saves are deleted only once a newer one is
complete."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pyhelpers.run import checkpoints
from pyhelpers.run.layout import RunLayout
from pyhelpers.run.records import write_record
from pyhelpers.stages import inputs

if TYPE_CHECKING:
    from pyhelpers.stages.context import StageContext

LOG = None  # in-process: the driver's log says why it failed
COLOUR = "#90a4ae"
GPU_PHASE = "teardown"  # run/gpu_time.py: between the job's end and the export
SHORT = True


def reads(lay: RunLayout, r: int, seed_bank: Path | None) -> list[inputs.RunInput]:
    return inputs.bank_and_analyst(lay, r, seed_bank)


def done(lay: RunLayout, r: int, rounds: int) -> tuple[bool, str]:
    dirs = checkpoints.iter_dirs(lay.megatron)
    kept = checkpoints.plan_rotation(lay.megatron).fallback  # the tracked save lost its data state (checkpoints.py)
    older = [i for i in dirs if i < lay.last_iteration(r) and i != kept]
    if older:
        return False, f"{len(older)} older checkpoint(s) to rotate"
    strays = checkpoints.stray_states(lay.megatron, below=lay.last_iteration(r))
    if strays:  # a rotation cut short between a save's dir and its state file
        return False, f"{len(strays)} rollout state file(s) of deleted checkpoints to remove"
    return True, "only the newest checkpoint remains"


def run(loop: StageContext, r: int) -> None:
    lay = loop.lay
    rotation = checkpoints.rotate(lay.megatron)
    for p in rotation.delete:
        loop.echo(f"rotate: deleted {p.relative_to(lay.save_dir)}")
    for note in rotation.notes:
        loop.echo(f"rotate: note: {note}")
    write_record(lay, r, "rotate", kept=rotation.keep, deleted=[p.name for p in rotation.delete])
