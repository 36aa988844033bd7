"""env/slime.lock: the versions the slime env was smoke-tested with (M5), and how they match.

Format: `name = version` per line, `#` comments. A found version matches a locked one when it is
equal or extends it by more components after '.' or '+': 3.12 matches 3.12.8, 2.16.1 matches
2.16.1+d0067d0, but 2.11.0+cu129 does not match 2.11.0+cu130.
"""

from __future__ import annotations

import re
from pathlib import Path

from pyhelpers.errors import ToolkitError

SPECIAL = ("python", "cuda-toolkit")  # not pip distributions
_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*=\s*(\S+)$")


def read_lock(path: Path) -> dict[str, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ToolkitError(f"cannot read the version lock ({exc.strerror})", str(path),
                           "set SLIME_LOCK to the lock file, e.g. env/slime.lock") from None
    lock: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = _LINE.match(line)
        if not m:
            raise ToolkitError(f"line {n} is not `name = version`: {raw.strip()!r}", str(path),
                               "fix the line (format described at the top of env/slime.lock)")
        lock[m.group(1)] = m.group(2)
    return lock


def dists(lock: dict[str, str]) -> tuple[str, ...]:
    """The pip distribution names of the lock (what the probe asks package metadata for)."""
    return tuple(k for k in lock if k not in SPECIAL)


def matches(found: str | None, locked: str) -> bool:
    if not found:
        return False
    return found == locked or (found.startswith(locked) and found[len(locked)] in ".+")
