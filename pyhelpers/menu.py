"""`make`'s menu (bin/help): the targets, then every knob with its default, fitted to the terminal.

rbenv-style: the targets and their groups (`## --- name ---` lines) are the Makefile's rules, in
its order; each target's text is the `# Summary:` header of bin/<target>, the verb it runs (the one
place a target's help is written). Knobs come from their declarations in env/defaults.env (the one
place defaults live, read by config/declarations.py), each with its brief: its description up to the first
comment line that ends a sentence (never cut mid-sentence; the README has the whole text).

The width is COLUMNS when set, else the terminal's, else 80 (a pipe). An entry that fits is one
line; a longer one is wrapped under its text column while that column leaves MIN_TEXT characters,
else its text goes under the name, indented (as click's and git's --help do): in 80 columns a
knob's text column (68) would leave 12.

Standard library only: bin/help runs this before `make setup` has made the venv.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from pyhelpers.config.declarations import read_knobs
from pyhelpers.doctor.base import wrap

ROOT = Path(__file__).resolve().parents[1]
INDENT, UNDER = " " * 4, " " * 8  # an entry's name; its text when it goes under the name
TARGET_PAD = (15,)  # name
KNOB_PAD = (28, 34)  # name, default
MIN_TEXT = 40
MIN_WIDTH = 40  # below this nothing reads well; wrap as if the terminal had this many columns


def width() -> int:
    return max(MIN_WIDTH, shutil.get_terminal_size((80, 24)).columns)


def entry(cells: tuple[str, ...], pads: tuple[int, ...], text: str, columns: int) -> list[str]:
    """One target or knob: its cells padded to their columns, then its text."""
    head = INDENT + " ".join(c.ljust(p) for c, p in zip(cells, pads, strict=True)) + " "
    if len(head) + len(text) <= columns:
        return [head + text]
    if columns - len(head) >= MIN_TEXT:
        return wrap(text, first=head, rest=" " * len(head), width=columns)
    name = head.rstrip() if len(head.rstrip()) <= columns else INDENT + " ".join(cells)
    return [name] + wrap(text, first=UNDER, rest=UNDER, width=columns)


def group(name: str, columns: int) -> list[str]:
    """A group of targets or a section of knobs: a blank line, then its name."""
    return [""] + wrap(name, first="  ", rest="    ", width=columns)


def summary(verb: str) -> str:
    """The `# Summary:` line of bin/VERB's first comment block, or a line saying it has none."""
    lines = (ROOT / "bin" / verb).read_text(encoding="utf-8").splitlines() if (ROOT / "bin" / verb).is_file() else []
    for n, line in enumerate(lines):
        if n > 0 and not line.startswith("#"):
            break
        if line.startswith("# Summary: "):
            return line[len("# Summary: "):]
    return f"(no # Summary: line in bin/{verb})"


def targets(columns: int) -> list[str]:
    out = []
    for line in (ROOT / "Makefile").read_text(encoding="utf-8").splitlines():
        if heading := re.match(r"^## --- (.*) ---$", line):
            out += group(heading.group(1), columns)
        elif rule := re.match(r"^([a-z][a-z_-]*):", line):
            out += entry((rule.group(1),), TARGET_PAD, summary(rule.group(1)), columns)
    return out


def knobs(columns: int) -> list[str]:
    out: list[str] = []
    section = None
    for knob in read_knobs().values():
        if knob.section != section:
            section = knob.section
            out += group(section, columns)
        out += entry((knob.name, knob.default or "(empty)"), KNOB_PAD, knob.brief, columns)
    return out


def menu(columns: int) -> list[str]:
    return (wrap("ShopSimRL — make <target> [KNOB=value ...]", rest="", width=columns) + ["", "Targets:"]
            + targets(columns) + [""]
            + wrap("Knobs (default from env/defaults.env; override in .env or as make KNOB=value):", rest="  ",
                   width=columns)
            + knobs(columns))


def main() -> None:
    try:
        sys.stdout.write("".join(line + "\n" for line in menu(width())))
        sys.stdout.flush()
    except BrokenPipeError:  # `make | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    main()
