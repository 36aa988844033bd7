"""How far the run is and when it ends: the training step, the evaluate episodes, ETAs.

Times come only from events.jsonl (the artifacts have no clock):
- a training step: the median of this run's last STEP_WINDOW `step-done` events (the driver
  appends one per step it sees in rollout_metrics.jsonl);
- the train stage after its last step (that step's training, the checkpoint, the job's end): the
  mean, over the rounds this run trained, of the time from the round's last `step-done` to its
  train `stage-end`;
- any other stage, or a whole train stage: the mean of its successful runs in this run
  (`stage-end`, status 0);
- the run's end after its last stage (END_OF_RUN): the W&B logging and the report, timed each time
  they run (in the background after each round, `wandb-logged` and `report-written`), and the
  cleanup of its services (`cleanup`, by an earlier driver or a restart).
What was never timed yet (round 0's evaluate) is left out of the sums and named, so an ETA never
pretends to know what it does not.
The driver prints an ETA per step; `make status` computes it again at the moment it is asked.
Pure functions, plus the small file the driver publishes evaluate's episode progress in.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pyhelpers.jsonfiles import load_json_or_none, write_bytes_atomic
from pyhelpers.rollout.metrics import PREFIX

STEP_WINDOW = 8
PUBLISHED = "progress.json"


def duration(s: float | None) -> str:
    """Seconds as H:MM:SS (or M:SS under an hour); '?' when unknown."""
    if s is None:
        return "?"
    s = int(max(0, round(s)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def step_seconds(evs: list[dict]) -> float | None:
    times = [float(e["seconds"]) for e in evs if e.get("kind") == "step-done" and e.get("seconds")]
    return statistics.median(times[-STEP_WINDOW:]) if times else None


@dataclass(frozen=True)
class EndPart:
    """Work between the last stage's end and the run's command returning."""
    kind: str    # the event that times it (its `seconds`)
    label: str   # its name in an ETA's "not timed yet"
    short: bool  # too short to name when untimed


WANDB_PART = EndPart("wandb-logged", "W&B", False)   # pyhelpers/cli/run_stage_cmd.py (log-wandb)
END_OF_RUN = (WANDB_PART, EndPart("report-written", "report", False),  # report/__init__.py build_timed
              EndPart("cleanup", "cleanup", True))   # run/stop.py cleanup
STEPPED_TAIL = "checkpoint"  # the label of a stepped stage's time after its last step


def mean_seconds(evs: list[dict], kind: str) -> float | None:
    times = [float(e["seconds"]) for e in evs if e.get("kind") == kind and e.get("seconds") is not None]
    return sum(times) / len(times) if times else None


def tail_seconds(evs: list[dict], stage: str) -> float | None:
    """The mean time from a round's last `step-done` to the successful end of its `stage` (train)."""
    tails, last_step = [], {}
    for e in evs:
        if e.get("kind") == "step-done":
            last_step[e.get("round")] = float(e["t"])
        elif (e.get("kind") == "stage-end" and e.get("stage") == stage and e.get("status") == 0
              and e.get("round") in last_step):
            tails.append(max(0.0, float(e["t"]) - last_step.pop(e["round"])))
    return sum(tails) / len(tails) if tails else None


def stage_seconds(evs: list[dict]) -> dict[str, float]:
    """stage -> mean seconds of its successful runs."""
    runs: dict[str, list[float]] = {}
    for e in evs:
        if e.get("kind") == "stage-end" and e.get("status") == 0 and e.get("seconds") is not None:
            runs.setdefault(e["stage"], []).append(float(e["seconds"]))
    return {k: sum(v) / len(v) for k, v in runs.items()}


@dataclass
class Eta:
    round_s: float | None   # until the current round's inject is done
    run_s: float | None     # until the run is done
    step_s: float | None    # one training step
    untimed: list[str] = field(default_factory=list)  # stages left out of the sums: not timed yet

    def words(self) -> str:
        if self.round_s is None and self.run_s is None:
            return "ETA unknown until a step is timed"
        out = f"ETA round {duration(self.round_s)}, run {duration(self.run_s)}"
        return out + (f" (+ {', '.join(self.untimed)}: not timed yet)" if self.untimed else "")


class StageFacts(Protocol):
    """What an ETA needs of a stage (the registry's Stage)."""
    name: str
    short: bool    # too short for an untimed ETA to deserve a word
    stepped: bool  # its time is STEPS_PER_ROUND training steps


def estimate(evs: list[dict], order: Sequence[StageFacts], rounds: int, steps: int, r: int, stage: str,
             steps_done: int, now: float | None = None, wandb: bool = True) -> Eta:
    """The ETA of round r (0-based) standing at `stage` with `steps_done` of its `steps` done;
    `order` is a round's stages in order (the registry's ROUND: passed in, because the train
    stage's step watcher asks too, and a stage cannot import the registry that imports it).
    wandb: the run logs to W&B (WANDB_MODE is not disabled)."""
    now = time.time() if now is None else now
    per_step, means = step_seconds(evs), stage_seconds(evs)
    untimed: list[str] = []

    def timed_or_named(seconds: float | None, label: str, short: bool = False) -> float:
        if seconds is None and not short and label not in untimed:
            untimed.append(label)
        return seconds or 0.0

    facts = {s.name: s for s in order}

    def stage_s(s: StageFacts) -> float:
        if s.name in means:
            return means[s.name]
        if s.stepped and per_step is not None:
            return per_step * steps
        return timed_or_named(None, s.name, s.short)

    now_stage = facts.get(stage)
    if now_stage is not None and now_stage.stepped:
        if per_step is None:
            return Eta(None, None, None)
        left = per_step * max(0, steps - steps_done) + timed_or_named(tail_seconds(evs, stage), STEPPED_TAIL)
    elif stage in means:
        started = next((e["t"] for e in reversed(evs) if e.get("kind") == "stage-start"
                        and e.get("stage") == stage), now)
        left = max(0.0, means[stage] - (now - started))
    elif now_stage is not None:
        left = stage_s(now_stage)
    else:  # a stage outside the round (baseline), never timed yet
        untimed.append(stage)
        left = 0.0
    names = [s.name for s in order]
    rest = order[names.index(stage) + 1:] if stage in names else order
    this_round = left + sum(stage_s(s) for s in rest)
    later = max(0, rounds - (r + 1)) * sum(stage_s(s) for s in order)
    end = sum(timed_or_named(mean_seconds(evs, p.kind), p.label, p.short)
              for p in END_OF_RUN if wandb or p is not WANDB_PART)
    return Eta(this_round, this_round + later + end, step_s=per_step, untimed=untimed)


def step_words(m: dict) -> str:
    """The step's figures: episodes played, kept/drawn groups when dynamic sampling reports them
    (with the kept groups that teach nothing, and whether the draw limit stopped the step: docs/
    training.md, "Dynamic sampling"), success rate."""
    parts = []
    if m.get(PREFIX + "episodes") is not None:
        parts.append(f"{int(m[PREFIX + 'episodes'])} episodes")
    if m.get(PREFIX + "groups_kept") is not None and m.get(PREFIX + "groups_drawn") is not None:
        notes = [f"{int(m[PREFIX + 'groups_kept_equal'])} without reward variance"] \
            if m.get(PREFIX + "groups_kept_equal") else []
        notes += ["draw limit reached"] if m.get(PREFIX + "draw_limit_reached") else []
        parts.append(f"groups kept {int(m[PREFIX + 'groups_kept'])} of {int(m[PREFIX + 'groups_drawn'])}"
                     + (f" ({', '.join(notes)})" if notes else ""))
    if m.get(PREFIX + "success_rate") is not None:
        parts.append(f"success {100 * m[PREFIX + 'success_rate']:.1f}%")
    return ", ".join(parts)


def publish(run_dir: Path, **fields) -> None:
    """The driver's live progress of a stage without events per unit (evaluate's episodes)."""
    write_bytes_atomic(Path(run_dir) / PUBLISHED,
                       json.dumps({"t": round(time.time(), 3), **fields}, sort_keys=True).encode())


def publisher(run_dir: Path, every_s: float = 1.0):
    """publish(line=...) at most once every `every_s` seconds (a terminal redraws 5 times a second)."""
    last = [0.0]

    def send(line: str) -> None:
        now = time.monotonic()
        if now - last[0] >= every_s:
            last[0] = now
            publish(run_dir, line=line)
    return send


def published(run_dir: Path) -> dict | None:
    return load_json_or_none(Path(run_dir) / PUBLISHED)
