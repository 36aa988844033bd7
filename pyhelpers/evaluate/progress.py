"""A progress line on stderr: done/total, success so far, episodes/s, ETA.

Hand-written (tqdm is not in the venv and one line of arithmetic does not justify it). On a TTY
the line is redrawn in place (carriage return) at most every 0.2 s; otherwise (logs, pipes) a
plain line is written every `every_s` seconds and at the end, so a log stays readable. The
stream is the caller's (the CLI passes stderr): this module never picks one itself.
"""

from __future__ import annotations

import io
import time
from pathlib import Path

from pyhelpers.jsonfiles import write_bytes_atomic


def _dur(s: float) -> str:
    s = int(max(0, s))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Progress:
    def __init__(self, label: str, total: int, *, already: int = 0, stream=None, every_s: float = 10.0,
                 enabled: bool = True):
        self.label, self.total, self.already = label, total, already
        self.stream = stream if stream is not None else io.StringIO()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = 0.2 if self.tty else every_s
        self.enabled = enabled
        self.done = self.scored = self.success = self.infra = 0
        self.t0 = self._last = time.monotonic()

    def add(self, rec: dict) -> None:
        self.done += 1
        if rec["termination"] == "infra_error":
            self.infra += 1
        else:
            self.scored += 1
            self.success += bool(rec["success"])
        now = time.monotonic()
        if now - self._last >= self.every or self.already + self.done >= self.total:
            self._last = now
            self._draw(now)

    def line(self, now: float | None = None) -> str:
        now = now or time.monotonic()
        elapsed = max(now - self.t0, 1e-9)
        rate = self.done / elapsed
        left = self.total - self.already - self.done
        eta = _dur(left / rate) if rate > 0 and left > 0 else "-"
        succ = f"{self.success / self.scored:.1%}" if self.scored else "-"
        infra = f", infra errors {self.infra}" if self.infra else ""
        return (f"{self.label}: {self.already + self.done}/{self.total} episodes, success {succ}{infra}, "
                f"{rate:.2f} ep/s, elapsed {_dur(elapsed)}, ETA {eta}")

    def _draw(self, now: float) -> None:
        if not self.enabled:
            return
        if self.tty:
            self.stream.write("\r" + self.line(now) + "\033[K")
        else:
            self.stream.write(self.line(now) + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()


class LatestLine:
    """A text stream for Progress that keeps only its latest line, in a file (replaced atomically):
    the one-job mode's eval hook plays in slime's RolloutManager, whose output goes to slime's log,
    so the driver shows the hook's progress by reading this file (stages/one_job.py)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def write(self, text: str) -> None:
        line = text.strip("\r\n").split("\r")[-1].replace("\033[K", "").strip()
        if line:
            write_bytes_atomic(self.path, (line + "\n").encode())

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def latest_line(path: Path) -> str:
    """The line a LatestLine stream last wrote to path ("" while none)."""
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""
