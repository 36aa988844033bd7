"""Where a run stands, derived from its artifacts (design.md §4) — never from a status file.

`position()` finds the first round whose inject artifact is missing, then the first stage of that
round whose "done" condition fails. `check_resume_round()` checks a user's `make resume ROUND=N`
against the disk and explains a contradiction; it never changes anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyhelpers.errors import ToolkitError
from pyhelpers.run import checkpoints as ck
from pyhelpers.run.layout import STAGES, RunLayout


@dataclass(frozen=True)
class Position:
    round: int | None  # None when the run is finished
    stage: str | None  # one of STAGES, "baseline", or None when finished
    detail: str

    @property
    def finished(self) -> bool:
        return self.stage is None

    def as_dict(self) -> dict:
        return {"round": self.round, "stage": self.stage, "detail": self.detail}


def train_done(lay: RunLayout, r: int) -> tuple[bool, str]:
    tracked = ck.read_tracker(lay.megatron)
    want = lay.last_iteration(r)
    if tracked is None:
        return False, f"no checkpoint yet; round {r} trains iterations {want - lay.steps_per_round + 1}..{want}"
    if tracked < want:
        return False, f"checkpoint at iteration {tracked}; round {r} continues to {want}"
    path = ck.iter_dirs(lay.megatron).get(tracked)
    if path is None or not ck.is_complete(path):
        return False, f"tracker names iteration {tracked} but iter_{tracked:07d} is missing or incomplete"
    return True, f"trained through iteration {tracked}"


def rotate_done(lay: RunLayout, r: int) -> tuple[bool, str]:
    dirs = ck.iter_dirs(lay.megatron)
    older = [i for i in dirs if i < lay.last_iteration(r)]
    if older:
        return False, f"{len(older)} older checkpoint(s) to rotate"
    strays = ck.stray_states(lay.megatron, below=lay.last_iteration(r))
    if strays:  # a rotation cut short between a save's dir and its state file
        return False, f"{len(strays)} rollout state file(s) of deleted checkpoints to remove"
    return True, "only the newest checkpoint remains"


def export_done(lay: RunLayout, r: int) -> tuple[bool, str]:
    want = lay.hf_dir(lay.last_iteration(r)).resolve()
    target = ck.hf_target(lay.hf_link)
    if target != want:
        return False, f"hf points at {target.name if target else 'nothing'}; needs {want.name}"
    problems = ck.hf_problems(want)
    if problems:
        return False, f"{want.name} incomplete: {problems[0]}"
    left = ck.old_exports(lay.save_dir, want)
    if left:  # a kill between the flip and the cleanup: the stage finishes by removing them
        return False, f"hf -> {want.name}; {len(left)} older export(s) to remove ({left[0].name})"
    return True, f"hf -> {want.name}"


def compile_done(lay: RunLayout, r: int) -> tuple[bool, str]:
    return lay.compiled(r).is_file(), "compiled.json"


def evaluate_done(lay: RunLayout, r: int) -> tuple[bool, str]:
    val, gate = lay.val_summary(r).is_file(), lay.gate_summary(r).is_file()
    if val and gate:
        return True, "val and gate summaries exist"
    return False, "val pending" if not val else "gate pending"


def inject_done(lay: RunLayout, r: int, rounds: int) -> tuple[bool, str]:
    out = lay.bank_out(r, rounds)
    if not out.is_file():
        return False, out.name
    if r == rounds - 1:
        # The final bank counts only if written after this round: a run that ended at fewer ROUNDS
        # (then raised, which is allowed) left the final bank of an earlier round.
        import json

        try:
            written_for = json.loads(out.read_text(encoding="utf-8")).get("round")
        except ValueError:
            return False, f"{out.name} unreadable"
        if written_for != rounds:
            return False, f"{out.name} is from round {written_for - 1 if isinstance(written_for, int) else '?'}'s end"
    return True, out.name


def _stage_done(lay: RunLayout, r: int, stage: str, rounds: int) -> tuple[bool, str]:
    if stage == "inject":
        return inject_done(lay, r, rounds)
    return {"train": train_done, "rotate": rotate_done, "export": export_done, "compile": compile_done,
            "evaluate": evaluate_done}[stage](lay, r)


def current_round(lay: RunLayout, rounds: int) -> int | None:
    """The first round whose inject artifact is missing (None: all rounds done)."""
    for r in range(rounds):
        if not inject_done(lay, r, rounds)[0]:
            return r
    return None


def position(lay: RunLayout, rounds: int, baseline_val: bool = False) -> Position:
    """The next thing to do, from the artifacts alone."""
    if baseline_val and not (lay.baseline_dir / "val" / "summary.json").is_file():
        return Position(0, "baseline", "bare val of the base model (BASELINE_VAL=1)")
    r = current_round(lay, rounds)
    if r is None:
        return Position(None, None, f"all {rounds} rounds done; final bank at {lay.final_bank.name}")
    tracked = ck.read_tracker(lay.megatron)
    if tracked is not None and tracked > lay.last_iteration(r):
        raise ToolkitError(
            f"checkpoint at iteration {tracked} is past round {r}'s end ({lay.last_iteration(r)}) but round {r} "
            f"was never finished ({lay.bank_out(r, rounds).name} missing)", str(lay.megatron),
            "the run's files disagree; check `make status` and restore the round's artifacts, or start a new RUN_NAME")
    for stage in STAGES:
        done, detail = _stage_done(lay, r, stage, rounds)
        if not done:
            return Position(r, stage, detail)
    raise AssertionError("unreachable: inject not done but every stage done")


def check_resume_round(lay: RunLayout, rounds: int, asked: int) -> Position:
    """`make resume ROUND=N`: the disk must agree that round N is where the run stands."""
    if not 0 <= asked < rounds:
        raise ToolkitError(f"ROUND={asked} is outside this run's rounds 0..{rounds - 1}", "make resume ROUND",
                           "round numbers are 0-based (round-000 is ROUND=0); raise ROUNDS to add rounds")
    pos = position(lay, rounds)
    tracked = ck.read_tracker(lay.megatron)
    if pos.finished:
        raise ToolkitError(f"ROUND={asked} asked, but every round is finished", str(lay.run_dir),
                           "nothing to resume; raise ROUNDS to train further")
    if pos.round != asked:
        found = f"tracker at iteration {tracked}" if tracked is not None else "no checkpoint"
        hint = (f"round {pos.round} is not finished yet ({pos.stage}: {pos.detail})" if pos.round < asked
                else f"round {asked} is already finished; the run stands at round {pos.round} ({pos.stage})")
        raise ToolkitError(f"ROUND={asked} does not match the disk: {hint}; {found}", str(lay.run_dir),
                           f"run `make resume ROUND={pos.round}`, or `make resume` to continue where it stands")
    if asked > 0 and pos.stage == "train" and tracked is None:
        raise ToolkitError(f"ROUND={asked} needs round {asked - 1}'s checkpoint, but there is none",
                           str(lay.megatron), "restore TRAIN_SAVE (make migrate-machine), or resume an earlier round")
    return pos
