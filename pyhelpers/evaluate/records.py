"""episodes.jsonl: one JSON line per finished episode, appended, flushed and fsynced per line.

The file is the evaluation's resume state: an episode whose line is in it is done. A run killed
mid-write leaves at most one torn last line (no newline, or not JSON); `read_records` drops it
and `repair` truncates the file to its last complete line, so appending goes on cleanly.
Lines are in completion order (concurrency); readers key them by episode id.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from pyhelpers.errors import ToolkitError
from pyhelpers.jsonfiles import write_bytes_atomic

log = logging.getLogger(__name__)


def _line(rec: dict) -> bytes:
    return (json.dumps(rec, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")


def read_records(path: Path) -> tuple[list[dict], int]:
    """(records, bytes of complete lines). Only newline-terminated lines count: trailing bytes
    without a newline are a torn write and are left out (that episode is simply played again).
    A complete line that is not a record is an error (the file was edited or mixed up)."""
    path = Path(path)
    if not path.exists():
        return [], 0
    data = path.read_bytes()
    good = data.rfind(b"\n") + 1
    recs = []
    for n, raw in enumerate(data[:good].split(b"\n")[:-1], 1):
        try:
            rec = json.loads(raw)
        except ValueError:
            rec = None
        if not isinstance(rec, dict) or "id" not in rec:
            raise ToolkitError(f"line {n} is not an episode record", str(path),
                               "the file was edited; restore it, or delete it to play every episode again")
        recs.append(rec)
    if good < len(data):
        log.warning("%s: dropping a torn last line (%d bytes)", path, len(data) - good)
    return recs, good


def repair(path: Path) -> list[dict]:
    """Read the records and cut a torn tail off the file; returns the records kept."""
    recs, good = read_records(path)
    path = Path(path)
    if path.exists() and path.stat().st_size != good:
        with open(path, "r+b") as fh:
            fh.truncate(good)
            fh.flush()
            os.fsync(fh.fileno())
    return recs


def rewrite(path: Path, recs: list[dict]) -> None:
    """Replace the file with exactly these records (atomically), e.g. without infra errors."""
    write_bytes_atomic(Path(path), b"".join(_line(r) for r in recs))


class Appender:
    """Appends records, one write + flush + fsync per line (a line on disk is an episode done)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "ab")

    def append(self, rec: dict) -> None:
        self._fh.write(_line(rec))
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()
