"""Per-step rollout/shopsim/* figures: what each episode reports, and the step's aggregate.

One `Step` per slime rollout step lives in this process (slime's RolloutManager actor): the
rollout function opens it (`begin`), every generate call adds its episode to it, the retry tasks
add theirs, and at the end of the step `summarize` turns it into the metrics dict slime logs on
`rollout/step` and that `append_jsonl` writes to the round's rollout_metrics.jsonl. Everything
runs on slime's one event loop thread except `begin` (called before the loop gets work).

Counted over every training episode the step *played*, including the groups slime's dynamic
filter dropped and the over-sampled ones it aborted (those count only in termination/aborted):
the figures describe the policy's behaviour, not only the kept batch. docs/training_monitoring.md
lists every name.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "rollout/shopsim/"
TERMINATIONS = ("done", "over", "max_turns", "context_budget", "aborted", "timeout", "infra_error")
SCORED = ("done", "over", "max_turns", "context_budget")  # the policy or the env ended it
INFRA = ("timeout", "infra_error")


@dataclass(frozen=True)
class EpisodeStats:
    """What the metrics need from one played episode."""

    termination: str
    turns: int
    success: bool = False
    strict: float = 0.0
    loose: float = 0.0
    reward: float = 0.0
    slot_wait_s: float = 0.0

    @property
    def scored(self) -> bool:
        return self.termination in SCORED


@dataclass
class Step:
    rollout_id: int
    episodes: list[EpisodeStats] = field(default_factory=list)
    failures: int = 0          # scored training episodes without full success (retry candidates)
    retries: list[EpisodeStats] = field(default_factory=list)   # retries actually played
    retry_skipped: int = 0     # no spare slot before the step ended (or spare slots = 0)
    spool_written: int = 0
    spool_existing: int = 0    # a replayed step: the record id was written before (first wins)
    spool_errors: int = 0
    spool_deferred: int = 0    # infra error, or step abandoned: no record (retry.py says why)
    unknown_slots_freed: int = 0  # failed resets that may have taken a slot, freed at the step's end
    groups_drawn: int = 0      # groups slime took from the data source this step (all draws)
    groups_kept: int = 0       # groups in the step's training batch
    groups_kept_equal: int = 0  # of those, groups whose trained rewards are all equal (no gradient)
    draw_limit_reached: bool = False  # DRAW_LIMIT_FACTOR stopped further draws (groups.keep_group)
    closing: bool = False      # set when slime's loop is done: queued retries give up
    abandoned: bool = False    # slime's loop raised (the job is being stopped): the step replays
    tasks: set = field(default_factory=set)  # background retry tasks (asyncio.Task)
    closed: asyncio.Event = field(default_factory=asyncio.Event)  # set with `closing`

    def add(self, ep: EpisodeStats) -> None:
        self.episodes.append(ep)

    async def wait_closed(self) -> bool:
        """For a retry whose turn slime's end-of-step abort hit: wait until the step's loop (and
        its abort) is over, then the turn may be sent again."""
        await self.closed.wait()
        return True


# Module state on purpose: slime calls our functions by dotted path inside its Ray actor (no object
# of ours lives there); one rollout step is open at a time per process.
_current: Step | None = None


def begin(rollout_id: int) -> Step:
    global _current
    _current = Step(rollout_id)
    return _current


def current(fallback_rollout_id: int | None) -> Step:
    """The open step. Without one (generate used without our rollout function, or after a step
    closed) a step for slime's current rollout id is opened; its retries are then not awaited."""
    global _current
    if _current is not None and not _current.closing:
        return _current
    if fallback_rollout_id is None:
        raise RuntimeError("no rollout step is open and slime set no rollout id "
                           "(pass --rollout-function-path pyhelpers.rollout.rollout.generate_rollout)")
    _current = Step(fallback_rollout_id)
    return _current


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize(step: Step) -> dict[str, float]:
    """The step's rollout/shopsim/* dict. Rates and means are left out when nothing was there to
    average (a 0 would read as a failure); every count is always present."""
    eps = step.episodes
    scored = [e for e in eps if e.scored]
    out: dict[str, float] = {"episodes": len(eps), "scored": len(scored),
                             "infra_errors": sum(e.termination in INFRA for e in eps),
                             "failures": step.failures, "retries": len(step.retries),
                             "retry_skipped": step.retry_skipped, "spool_written": step.spool_written,
                             "spool_existing": step.spool_existing, "spool_errors": step.spool_errors,
                             "spool_deferred": step.spool_deferred, "unknown_slots_freed": step.unknown_slots_freed,
                             "groups_drawn": step.groups_drawn, "groups_kept": step.groups_kept,
                             "groups_kept_equal": step.groups_kept_equal,
                             "draw_limit_reached": float(step.draw_limit_reached)}
    for reason in TERMINATIONS:
        out[f"termination/{reason}"] = sum(e.termination == reason for e in eps)
    optional = {
        "success_rate": _mean([float(e.success) for e in scored]),
        "strict_mean": _mean([e.strict for e in scored]),
        "loose_mean": _mean([e.loose for e in scored]),
        "reward_mean": _mean([e.reward for e in scored]),
        "turns_mean": _mean([float(e.turns) for e in scored]),
        "turns_max": max((e.turns for e in scored), default=None),
        "retry_rate": len(step.retries) / step.failures if step.failures else None,
        "keep_ratio": step.groups_kept / step.groups_drawn if step.groups_drawn else None,
        "retry_success": _mean([float(r.success) for r in step.retries]),
        "slot_wait_mean_s": _mean([e.slot_wait_s for e in eps if e.termination != "aborted"]),
        "slot_wait_max_s": max((e.slot_wait_s for e in eps), default=None),
    }
    out.update({k: v for k, v in optional.items() if v is not None and math.isfinite(v)})
    return {PREFIX + k: float(v) for k, v in sorted(out.items())}


def append_jsonl(path: Path, round_: int, rollout_id: int, metrics: dict[str, float]) -> None:
    """One line per step: {"round", "rollout_id", "metrics"}. No clock. A step slime replays after
    a resume appends another line with the same rollout_id: readers keep the last (read_jsonl)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"round": round_, "rollout_id": rollout_id, "metrics": metrics}, sort_keys=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _records(path: Path) -> list[dict]:
    """Every whole line of the file, in order (a torn last line from a crash is skipped)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def read_jsonl(path: Path) -> dict[int, dict]:
    """rollout_id -> the last line written for it (a torn last line from a crash is skipped)."""
    return {int(rec["rollout_id"]): rec for rec in _records(path)}


def last_record(path: Path) -> dict | None:
    """The step written last (the one in progress after a replay is the newest line, not the
    highest rollout_id), or None."""
    recs = _records(path)
    return recs[-1] if recs else None
