"""The README tells the truth about the menu: every make target it documents exists, every target
of the Makefile is documented, and each has a `## help` line for `make`'s menu."""

from __future__ import annotations

import re

from conftest import ROOT


def _makefile_targets() -> dict[str, str]:
    text = (ROOT / "Makefile").read_text()
    return dict(re.findall(r"^([a-z][a-z_-]*):[^\n]*?##\s*(.+)$", text, flags=re.M))


def test_every_make_target_is_documented_and_every_documented_one_exists():
    targets = _makefile_targets()
    phony = set(re.findall(r"^\.PHONY:\s*(\S+)", (ROOT / "Makefile").read_text(), flags=re.M))
    assert phony == set(targets), "every .PHONY target needs a `## help` line (and vice versa)"
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Make targets", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `make ([a-z-]+)(?=[ `])", table, flags=re.M))
    assert documented - set(targets) == set(), "README documents targets the Makefile lacks"
    assert set(targets) - documented == set(), "Makefile targets missing from README's table"


def test_the_quick_start_is_the_two_commands():
    quick = (ROOT / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    first_block = quick.split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in first_block.strip().splitlines()]
    assert commands == ["make train", "make test"]
    assert "make rehearse" in quick.split("```bash", 2)[2]  # the next thing a new user learns


def test_the_restart_rules_in_the_readme_are_the_codes():
    from pyhelpers.loop.supervisor import RULES

    readme = (ROOT / "README.md").read_text()
    table = readme.split("### Self-healing and notifications", 1)[1].split("\n### ", 1)[0]
    rows = dict(re.findall(r"^\| `([a-z-]+)` \| (transient|permanent) \|", table, flags=re.M))
    assert {cause: kind for cause, kind, _, _ in RULES} == rows


def test_nothing_in_the_clone_points_outside_it():
    """A user's clone has nothing beside it: no file may read or cite a sibling directory such as
    the developers' reference material (env/flags/ and docs/ hold those facts)."""
    import subprocess

    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    # The developers' notes (design, interfaces, platform facts...) are not in a user's clone either:
    # a citation of one is a dead end; docs/architecture.md and docs/requirements.md carry the facts.
    sibling = re.compile(r"\.\./" + "shared|(?<![\\w.])" + r"shared/(reference|docs)\b|\b(design|interfaces|conventions|memo"
                         + r"|platform-facts|slime-interface)\.md\b")
    hits = [f"{f}:{n}" for f in files if f and (ROOT / f).is_file()
            for n, line in enumerate((ROOT / f).read_text(errors="replace").splitlines(), 1) if sibling.search(line)]
    assert hits == []
