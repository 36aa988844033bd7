"""Where a run stands, derived from its artifacts (architecture §4) — never from a status file.

`position()` finds the first round whose last stage (stages.END) is not done, then the first stage
of that round whose done() (pyhelpers/stages/<stage>.py) is false. `check_resume_round()` checks a
user's `make resume ROUND=N` against the disk and explains a contradiction; it never changes anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyhelpers import stages
from pyhelpers.errors import ToolkitError
from pyhelpers.run import checkpoints
from pyhelpers.run.layout import RunLayout


@dataclass(frozen=True)
class Position:
    round: int | None  # None when the run is finished
    stage: str | None  # a name in the registry (stages.ALL_NAMES), or None when finished
    detail: str

    @property
    def finished(self) -> bool:
        return self.stage is None

    def as_dict(self) -> dict:
        return {"round": self.round, "stage": self.stage, "detail": self.detail}


def current_round(lay: RunLayout, rounds: int) -> int | None:
    """The first round whose last stage (stages.END) is not done (None: all rounds done)."""
    for r in range(rounds):
        if not stages.END.done(lay, r, rounds)[0]:
            return r
    return None


def position(lay: RunLayout, rounds: int, baseline_val: bool = False) -> Position:
    """The next thing to do, from the artifacts alone."""
    if baseline_val:
        done, detail = stages.BASELINE.done(lay, 0, rounds)
        if not done:
            return Position(0, stages.BASELINE.name, detail)
    r = current_round(lay, rounds)
    if r is None:
        return Position(None, None, f"all {rounds} rounds done; final bank at {lay.final_bank.name}")
    tracked = checkpoints.read_tracker(lay.megatron)
    if tracked is not None and tracked > lay.last_iteration(r):
        raise ToolkitError(
            f"checkpoint at iteration {tracked} is past round {r}'s end ({lay.last_iteration(r)}) but round {r} "
            f"was never finished ({lay.bank_out(r, rounds).name} missing)", str(lay.megatron),
            "the run's files disagree; check `make status` and restore the round's artifacts, or start a new RUN_NAME")
    for stage in stages.ROUND:
        done, detail = stage.done(lay, r, rounds)
        if not done:
            return Position(r, stage.name, detail)
    raise AssertionError("unreachable: the round's last stage is not done but every stage is")


def check_resume_round(lay: RunLayout, rounds: int, asked: int) -> Position:
    """`make resume ROUND=N`: the disk must agree that round N is where the run stands."""
    if not 0 <= asked < rounds:
        raise ToolkitError(f"ROUND={asked} is outside this run's rounds 0..{rounds - 1}", "make resume ROUND",
                           "round numbers are 0-based (round-000 is ROUND=0); raise ROUNDS to add rounds")
    pos = position(lay, rounds)
    tracked = checkpoints.read_tracker(lay.megatron)
    if pos.finished:
        raise ToolkitError(f"ROUND={asked} asked, but every round is finished", str(lay.run_dir),
                           "nothing to resume; raise ROUNDS to train further")
    if pos.round != asked:
        found = f"tracker at iteration {tracked}" if tracked is not None else "no checkpoint"
        hint = (f"round {pos.round} is not finished yet ({pos.stage}: {pos.detail})" if pos.round < asked
                else f"round {asked} is already finished; the run stands at round {pos.round} ({pos.stage})")
        raise ToolkitError(f"ROUND={asked} does not match the disk: {hint}; {found}", str(lay.run_dir),
                           f"run `make resume ROUND={pos.round}`, or `make resume` to continue where it stands")
    if asked > 0 and pos.stage == stages.ROUND[0].name and tracked is None:  # it loads round r-1's save
        raise ToolkitError(f"ROUND={asked} needs round {asked - 1}'s checkpoint, but there is none",
                           str(lay.megatron), "restore TRAIN_SAVE (make migrate-machine), or resume an earlier round")
    return pos
