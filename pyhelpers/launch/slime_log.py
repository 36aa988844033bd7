"""What the toolkit reads from the slime job's own log (logs/slime-log.log, Ray's driver log copied).

slime (THUDM/slime at 624b824) logs one line when a rollout's training is over: the Megatron
actor's train() ends, then log_perf_data (slime/backends/megatron_utils/actor.py:564, which calls
slime/observability/train_metric_utils.py:401) logs `perf <rollout_id>: {...}` from the main rank,
with slime's format `[%Y-%m-%d %H:%M:%S] <file>:<line> - <message>`
(slime/observability/logging_utils.py:21, set in every train actor: slime/ray/train_actor.py:27).
Ray forwards it to the driver's log with an `(<actor class> pid=<pid>) ` prefix.

The RolloutManager logs a line of the same words after each generation
(slime/observability/rollout_metrics.py:268), so the file name tells them apart; the line number
is not matched (it moves between slime versions, the file and the message have not).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

_TRAIN_DONE = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[^\]]*\] train_metric_utils\.py:\d+ - perf (\d+): ")


def trained(text: str) -> list[tuple[int, float]]:
    """(rollout id, when) for each rollout whose training slime logged as done in `text`, in log
    order. `when` is the line's own time (whole seconds, this machine's local time, as slime's
    logger writes it), the end of that second: a reader that noticed the line sooner knows better."""
    out = []
    for m in _TRAIN_DONE.finditer(text):
        logged = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + 1.0
        out.append((int(m.group(2)), logged))
    return out


class Tail:
    """Reads the lines a growing log file gained since the last read (whole lines only)."""

    def __init__(self, path: Path, *, from_end: bool = False) -> None:
        """from_end: what the file holds now is skipped (it is appended to job after job)."""
        self.path, self.offset = path, 0
        if from_end and path.exists():
            self.offset = path.stat().st_size

    def new_text(self) -> str:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return ""
        end = data.rfind(b"\n") + 1  # a line still being written is read next time, whole
        self.offset += end
        return data[:end].decode("utf-8", "replace")
