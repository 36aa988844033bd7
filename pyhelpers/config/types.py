"""One type and one range per knob, declared once beside its default in env/defaults.env.

The line right above ``NAME=default`` reads ``#: TYPE RANGE``:

    int >= 1            a whole number; the range is a bound (>=, >, <=, <) or an interval
    float (0, 1]        a finite decimal number; intervals use [ ] (inclusive) and ( ) (exclusive)
    flag 0|1            a switch
    choice a|b|c        one of the words
    path                text naming a file or directory (relative: to the project root)
    name                letters, digits, '.', '_' and '-', starting with a letter or digit
    host                a host name or an IP address
    url                 http:// or https:// followed by the address
    command             a command line (shell quoting; split with shlex)
    names               words separated by commas
    text                any text

A string type is non-empty unless followed by ``or empty``. `pyhelpers config check` (make check, and
every bin/ script through `config export`) validates each knob against its spec before anything
starts, so the code that reads a knob trusts it. `bad_examples()` gives, per spec, a value of the
wrong type and a value out of range: tests/test_config_knobs.py walks every knob with them.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass

_INT = re.compile(r"-?\d+")
_FLOAT = re.compile(r"-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")
_BOUND = re.compile(r"(>=|>|<=|<)\s*(\S+)")
_INTERVAL = re.compile(r"([\[(])\s*([^,\s]+)\s*,\s*([^\])\s]+)\s*([\])])")
# (pattern of a valid value, a value of the wrong type, what a valid value looks like)
STRINGS: dict[str, tuple[re.Pattern | None, str | None, str]] = {
    "path": (None, None, "a path"),
    "text": (None, None, "any text"),
    "name": (re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*"), "not/a name", "made of letters, digits, '.', '_' and '-' only"),
    "host": (re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]*|[0-9A-Fa-f:]*:[0-9A-Fa-f:.]*"), "not a host!",
             "a host name or IP address"),
    "url": (re.compile(r"https?://\S+"), "not-a-url", "an http:// or https:// URL"),
    "command": (None, "'unclosed quote", "a command line"),
    "names": (re.compile(r"\s*[A-Za-z0-9_.-]+\s*(,\s*[A-Za-z0-9_.-]+\s*)*"), "a;b c", "comma-separated words"),
}
NUMBERS = ("int", "float")
WORDS = ("flag", "choice")


class SpecError(ValueError):
    """A `#:` line env/defaults.env cannot mean (a bug in the file, not in a user's value)."""


@dataclass(frozen=True)
class KnobType:
    """A parsed `#: TYPE RANGE` line; `text` is the line as declared (shown in errors and README)."""

    kind: str
    text: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] = ()
    empty_ok: bool = False

    # --- validation ------------------------------------------------------------------------
    def problem(self, raw: str) -> str | None:
        """Why `raw` is not a value of this type and range (a phrase), or None when it is."""
        if self.kind in NUMBERS:
            return self._number_problem(raw)
        if self.kind in WORDS:
            return None if raw in self.choices else f"is not {self._choice_words()}"
        if raw == "":
            return None if self.empty_ok else "is empty"
        pattern, _, looks = STRINGS[self.kind]
        if self.kind == "command":
            try:
                if not shlex.split(raw):
                    return "is an empty command"
            except ValueError as exc:
                return f"is not a command line ({exc})"
        elif pattern is not None and not pattern.fullmatch(raw):
            return f"is not {looks}"
        return None

    def _number_problem(self, raw: str) -> str | None:
        text = raw.strip()
        if self.kind == "int" and not _INT.fullmatch(text):
            return "is not a whole number"
        if self.kind == "float" and not _FLOAT.fullmatch(text):
            return "is not a number" + (" (finite, written as digits)" if text.lower() in ("nan", "inf", "-inf")
                                        else "")
        value = float(text)
        if not math.isfinite(value):
            return "is not a finite number"
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return "is out of range"
        if self.high is not None and (value > self.high or (self.high_open and value == self.high)):
            return "is out of range"
        return None

    def _choice_words(self) -> str:
        return "one of " + ", ".join(self.choices)

    # --- for tests and docs ----------------------------------------------------------------
    def bad_examples(self) -> dict[str, str]:
        """{'wrong type': value, 'out of range': value}, for the kinds that have one."""
        out: dict[str, str] = {}
        if self.kind in NUMBERS:
            out["wrong type"] = "abc"
            if self.low is not None:
                out["out of range"] = _fmt(self.low if self.low_open else self.low - 1, self.kind)
            elif self.high is not None:
                out["out of range"] = _fmt(self.high if self.high_open else self.high + 1, self.kind)
        elif self.kind in WORDS:
            out["wrong type"] = "maybe"
            out["out of range"] = "2" if self.kind == "flag" else "none-of-these"
        else:
            wrong = STRINGS[self.kind][1]
            if wrong is not None:
                out["wrong type"] = wrong
            if not self.empty_ok:
                out["out of range"] = ""
        return out


def _fmt(x: float, kind: str) -> str:
    return str(int(x)) if kind == "int" and float(x).is_integer() else repr(float(x))


def _number(s: str, where: str) -> float:
    if s in ("inf", "-inf"):
        return float(s)
    if not _FLOAT.fullmatch(s):
        raise SpecError(f"{where}: {s!r} is not a number")
    return float(s)


def parse(text: str, where: str = "#:") -> KnobType:
    """A `#:` line's text (without the `#:`) -> KnobType; SpecError names `where` when it is not one."""
    text = " ".join(text.split())
    kind, _, rest = text.partition(" ")
    if kind in NUMBERS:
        b, i = _BOUND.fullmatch(rest), _INTERVAL.fullmatch(rest)
        if b:
            op, x = b.group(1), _number(b.group(2), where)
            if op.startswith(">"):
                return KnobType(kind, text, low=x, low_open=op == ">")
            return KnobType(kind, text, high=x, high_open=op == "<")
        if i:
            lo, hi = _number(i.group(2), where), _number(i.group(3), where)
            return KnobType(kind, text, low=None if lo == -math.inf else lo, high=None if hi == math.inf else hi,
                            low_open=i.group(1) == "(", high_open=i.group(4) == ")")
        raise SpecError(f"{where}: {kind} needs a range such as '>= 1' or '(0, 1]', got {rest!r}")
    if kind == "flag":
        if rest != "0|1":
            raise SpecError(f"{where}: write a flag as 'flag 0|1'")
        return KnobType(kind, text, choices=("0", "1"))
    if kind == "choice":
        choices = tuple(c for c in rest.split("|") if c)
        if len(choices) < 2 or " " in rest:
            raise SpecError(f"{where}: write 'choice a|b|c', got {rest!r}")
        return KnobType(kind, text, choices=choices)
    if kind in STRINGS:
        if rest not in ("", "or empty"):
            raise SpecError(f"{where}: a {kind} is followed by nothing or by 'or empty', got {rest!r}")
        return KnobType(kind, text, empty_ok=rest == "or empty")
    raise SpecError(f"{where}: unknown type {kind!r} (use one of {', '.join((*NUMBERS, *WORDS, *STRINGS))})")
