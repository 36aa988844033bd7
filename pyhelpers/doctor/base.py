"""What a doctor check returns (Result), and what every check reads (Context).

A check is a function `check(ctx) -> list[Result]`. It reads the resolved Config and the base
environment the CLI handed over (for child processes: PATH, HOME, LD_LIBRARY_PATH), never
os.environ. Results that several checks need (the slime env probe, the GPU list) are computed
once and cached on the Context, errors included.
"""

from __future__ import annotations

import re
import subprocess
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyhelpers.config.declarations import is_secret
from pyhelpers.config.load import Config

PASS, WARN, FAIL, SKIP = "PASS", "WARN", "FAIL", "SKIP"
STATUSES = (PASS, WARN, FAIL, SKIP)
PROFILES = ("full", "rehearse")
# `make doctor` wraps its lines here: a 439-character line cannot be read in a terminal pane
# (tests/test_doctor_cli.py bounds it). A word longer than a line (a deep path) stays whole, on a
# line of its own, so it can still be copied.
WIDTH = 100
# What `make train` prints before anything starts (its preflight's failures, the configuration's
# errors) is the first screen of a fresh machine: it fits a default 80-column terminal.
TERMINAL = 80
HANG = " " * 23  # under the text after "FAIL  system-disk      "


_COMMAND = re.compile(r"`[^`]*`")
_KEEP = "\x00"  # stands for a space inside a `command` while wrapping: a command is never split


def wrap(text: str, first: str = "", rest: str = HANG, width: int = WIDTH) -> list[str]:
    """text as lines of at most width characters: the first starts with `first`, the others with `rest`."""
    text = _COMMAND.sub(lambda m: m.group(0).replace(" ", _KEEP), text)
    lines = textwrap.wrap(text, width, initial_indent=first, subsequent_indent=rest,
                          break_long_words=False, break_on_hyphens=False) or [first]
    return [ln.replace(_KEEP, " ") for ln in lines]


@dataclass(frozen=True)
class Result:
    """One line of `make doctor`: status, check name, what was found, the fix, and detail lines."""

    name: str
    status: str
    found: str
    fix: str = ""
    details: tuple[str, ...] = ()

    def line(self) -> str:
        """The whole result on one line (for logs and messages; `make doctor` prints lines())."""
        return f"{self.status}  {self.name:<16} {self.found}" + (f"  (fix: {self.fix})" if self.fix else "")

    def brief(self, width: int = TERMINAL) -> list[str]:
        """The result as make train's preflight shows a failure: its name and fix (what was found
        when it has no fix), wrapped to width; `make doctor` shows the rest."""
        return wrap(f"fix: {self.fix}" if self.fix else self.found, first=f"{self.status}  {self.name:<16} ",
                    width=width)

    def lines(self, details: bool = True) -> list[str]:
        """What `make doctor` prints for it, wrapped to WIDTH: the status line, `fix: ...` under
        it, then the detail lines (when details)."""
        out = wrap(self.found, first=f"{self.status}  {self.name:<16} ")
        if self.fix:
            out += wrap(f"fix: {self.fix}", first=HANG)
        for d in self.details if details else ():
            out += wrap(d, first="      | ", rest="      |   ")
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "found": self.found, "fix": self.fix,
                "details": list(self.details)}


def result(name: str, status: str, found: str, *, fix: str = "", details=()) -> Result:
    return Result(name, status, found=found, fix=fix, details=tuple(details))


class CheckError(Exception):
    """A prerequisite of a check could not be obtained (e.g. nvidia-smi failed): found + fix."""

    def __init__(self, found: str, fix: str = "", details=()):
        super().__init__(found)
        self.found, self.fix, self.details = found, fix, tuple(details)


@dataclass
class Context:
    cfg: Config
    environ: Mapping[str, str]  # the CLI's process environment: base of every child's env
    profile: str  # full | rehearse: DOCTOR_PROFILE, or `make doctor PROFILE=...` (no default: the knob's)
    fresh_run: bool = False  # a fresh rehearsal: the previous one's files will not be read
    _cache: dict[str, Any] = field(default_factory=dict)

    def child_env(self, **extra: str) -> dict[str, str]:
        """Environment for a child process: the base environment without any secret."""
        secrets = self.cfg.secret_names
        env = {k: v for k, v in self.environ.items() if k not in secrets and not is_secret(k)}
        env.update(extra)
        return env

    def cached(self, key: str, compute: Callable[[], Any]) -> Any:
        """compute() once; a CheckError it raises is cached and re-raised to every caller."""
        if key not in self._cache:
            try:
                self._cache[key] = ("ok", compute())
            except CheckError as exc:
                self._cache[key] = ("error", exc)
        kind, value = self._cache[key]
        if kind == "error":
            raise value
        return value

    def run(self, argv: list[str], timeout: float, stdin: str | None = None,
            env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
        """Run a program (argv list, never a shell string) with the secret-free environment;
        a missing program or a timeout becomes a CheckError naming it."""
        try:
            return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout,
                                  env=dict(env) if env is not None else self.child_env(), check=False)
        except FileNotFoundError:
            raise CheckError(f"{argv[0]} not found",
                             "install it, or point its knob in .env (see env/defaults.env) at it") from None
        except PermissionError:
            raise CheckError(f"{argv[0]} is not executable", f"chmod +x {argv[0]}, or point its knob elsewhere") from None
        except subprocess.TimeoutExpired:
            raise CheckError(f"{' '.join(argv[:2])} did not finish within {timeout:.0f} s",
                             "run it by hand to see where it hangs (a stuck driver or a slow disk)") from None

    def path(self, name: str) -> Path:
        return self.cfg.path(name)


def tail(text: str, lines: int = 5) -> str:
    """The last lines of a program's output, joined with ' | ' for one-line messages."""
    kept = [ln.strip() for ln in text.strip().splitlines() if ln.strip()][-lines:]
    return " | ".join(kept)
