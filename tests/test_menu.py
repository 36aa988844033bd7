"""`make`'s menu (bin/help) fits the terminal it is printed in (issue 40, item 4).

In an 80-column terminal 147 of its 202 lines were longer than 80 characters (the longest 447):
knob texts started at column 69, so every one wrapped, and COLUMNS was ignored. Now an entry that
fits stays on one line; one that does not is wrapped under its text column, or, where that column
leaves too little room, the text goes under the name, indented (as click's and git's --help do).
"""

from __future__ import annotations

import os
import pty
import re
import shutil
import struct
import subprocess
import sys

from conftest import ROOT

WIDE = 1000  # every entry on one line


def _menu(columns: int | None = None, **kwargs) -> str:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run([str(ROOT / "bin" / "help")], env=env, capture_output=True, text=True, timeout=60,
                          check=True, **kwargs).stdout


def _names() -> list[str]:
    """Every target of the Makefile and every knob of env/defaults.env."""
    targets = re.findall(r"^([a-z][a-z_-]*):", (ROOT / "Makefile").read_text(), flags=re.M)
    knobs = re.findall(r"^([A-Z_][A-Z0-9_]*)=", (ROOT / "env" / "defaults.env").read_text(), flags=re.M)
    return targets + knobs


def _too_long(text: str, width: int) -> list[str]:
    return [ln for ln in text.splitlines() if len(ln) > width]


def test_in_80_columns_no_line_is_longer_and_every_target_and_knob_starts_a_line():
    menu = _menu(80)
    long = _too_long(menu, 80)
    assert not long, (f"{len(long)} of {len(menu.splitlines())} lines are longer than 80 characters "
                      f"(the longest {max(map(len, long))}):\n" + "\n".join(long[:5]))
    starts = {ln.split()[0] for ln in menu.splitlines() if ln.startswith("    ") and not ln.startswith("     ")}
    assert [n for n in _names() if n not in starts] == []


def test_wrapping_changes_only_where_lines_break():
    """The same words in the same order at any width: nothing is cut, nothing is added."""
    wide = _menu(WIDE)
    for columns in (80, 120, 200):
        assert _menu(columns).split() == wide.split(), columns


def test_in_200_columns_an_entry_that_fits_stays_on_one_line():
    wide, menu = _menu(WIDE), _menu(200)
    short = [ln for ln in wide.splitlines() if len(ln) <= 200]
    assert len(short) > 100, "most entries fit in 200 columns"
    lines = set(menu.splitlines())
    assert [ln for ln in short if ln not in lines] == []
    assert not _too_long(menu, 200)


def test_a_text_too_long_for_its_column_goes_under_the_name():
    """In 80 columns a knob's text (its column is 68) is wrapped beneath the knob, indented; a
    target's (its column is 20) is wrapped in its column."""
    lines = _menu(80).splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.split()[:1] == ["DRAW_LIMIT_FACTOR"])
    assert lines[at].split() == ["DRAW_LIMIT_FACTOR", "4"]
    assert lines[at + 1].startswith("        A step draws at most") and re.match(r"^ {8}\S", lines[at + 2])
    wide = _menu(WIDE).splitlines()
    target = next(ln for ln in wide if 80 < len(ln) and re.match(r"^    [a-z-]+ +\S", ln))
    name = target.split()[0]
    at = next(i for i, ln in enumerate(lines) if ln.split()[:1] == [name])
    assert lines[at][20] != " " and lines[at + 1].startswith(" " * 20) and lines[at + 1][20] != " ", lines[at:at + 2]


def test_without_columns_the_terminal_s_width_else_80():
    """COLUMNS is a shell variable, seldom exported: the menu asks the terminal, and prints for 80
    columns into a pipe."""
    assert not _too_long(_menu(), 80) and _too_long(_menu(WIDE), 80)
    import fcntl
    import termios

    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 130, 0, 0))
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.Popen([str(ROOT / "bin" / "help")], env=env, stdout=child, stderr=subprocess.PIPE)
    os.close(child)  # read until the menu's side closes (a pty holds a few KiB: read while it writes)
    out = b""
    try:
        while chunk := os.read(main, 65536):
            out += chunk
    except OSError:  # EIO: the writer has closed its side and everything was read
        pass
    finally:
        os.close(main)
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    text = out.decode().replace("\r\n", "\n")
    assert text.split() == _menu(WIDE).split()
    assert not _too_long(text, 130) and _too_long(text, 100), "the terminal's 130 columns are used"


def test_the_menu_works_before_setup(tmp_path):
    """`make` on a fresh clone, before `make setup` made .venv: the menu needs only python3's
    standard library."""
    clone = tmp_path / "clone"
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                            "Makefile", "bin", "env", "pyhelpers"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    for rel in files:
        (clone / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, clone / rel)
    assert not (clone / ".venv").exists()
    env = {**{k: v for k, v in os.environ.items() if k != "COLUMNS"}, "PYTHON": sys.executable}
    menu = subprocess.run([str(clone / "bin" / "help")], env=env, capture_output=True, text=True, timeout=60)
    assert menu.returncode == 0, menu.stderr
    assert menu.stdout.split() == _menu(WIDE).split()
