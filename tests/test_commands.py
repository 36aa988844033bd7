"""One way in for commands (issue 26, item 5): every make target is a verb in bin/, rbenv-style.

`make T` runs bin/T (one file per verb, its `# Summary:` and `# Usage:` header lines at the top),
and `make`'s menu is printed from those headers: the Makefile holds the targets, their groups and
how make variables become the verb's arguments, never a target's help text (one place for it).
"""

from __future__ import annotations

import os
import re
import subprocess

from conftest import ROOT

MAKEFILE = (ROOT / "Makefile").read_text()
RULE = re.compile(r"^([a-z][a-z_-]*):(.*)$", flags=re.M)


def _targets() -> list[str]:
    return [name for name, _ in RULE.findall(MAKEFILE)]


def _recipe(target: str) -> list[str]:
    """The recipe lines of `target` (tab-indented, up to the next blank line)."""
    body = MAKEFILE.split(f"\n{target}:", 1)[1].split("\n", 1)[1]
    return [ln.strip() for ln in body.split("\n\n", 1)[0].splitlines() if ln.startswith("\t")]


def _header(verb: str) -> dict[str, str]:
    """The `# Name: text` lines of bin/<verb>'s first comment block."""
    out = {}
    for line in (ROOT / "bin" / verb).read_text().splitlines()[1:]:
        if not line.startswith("#"):
            break
        m = re.match(r"# (Summary|Usage): (.+)$", line)
        if m:
            out.setdefault(m.group(1), m.group(2).strip())
    return out


def test_every_make_target_runs_its_own_bin_verb_with_a_summary_and_usage():
    targets = _targets()
    assert len(targets) == len(set(targets)) and "help" in targets and "train" in targets
    problems = []
    for target in targets:
        verb = ROOT / "bin" / target
        if not (verb.is_file() and os.access(verb, os.X_OK)):
            problems.append(f"make {target}: no executable bin/{target}")
            continue
        header = _header(target)
        for field in ("Summary", "Usage"):
            if field not in header:
                problems.append(f"bin/{target}: no `# {field}:` header line")
        recipe = _recipe(target)
        if len(recipe) != 1 or not re.match(rf"^@(\$\(IN_RUN\))?bin/{re.escape(target)}(\s|$)", recipe[0]):
            problems.append(f"make {target}: the recipe is not one line calling bin/{target}: {recipe}")
    assert not problems, "\n".join(problems)
    helped = [name for name, rest in RULE.findall(MAKEFILE) if "##" in rest]
    assert not helped, f"help text belongs in bin/<verb>'s Summary, not on the Makefile's target line: {helped}"


def test_the_menu_lists_exactly_the_targets_with_their_summaries():
    # COLUMNS wide enough for each entry on one line (the menu fits narrower ones: tests/test_menu.py)
    menu = subprocess.run([str(ROOT / "bin" / "help")], capture_output=True, text=True, timeout=60, check=True,
                          env={**os.environ, "COLUMNS": "1000"}).stdout
    section = menu.split("Targets:\n", 1)[1].split("\nKnobs", 1)[0]
    listed = re.findall(r"^    (\S+) +(.+)$", section, flags=re.M)
    assert [name for name, _ in listed] == _targets()
    for name, summary in listed:
        assert summary == _header(name)["Summary"], name
