"""The README tells the truth about the menu: every make target it documents exists, every target
of the Makefile is documented, and each has its menu line (the `# Summary:` of bin/<target>)."""

from __future__ import annotations

import re

from conftest import ROOT


def _makefile_targets() -> dict[str, str]:
    """target -> its line in `make`'s menu, for the Makefile's targets whose bin/ verb has one."""
    text = (ROOT / "Makefile").read_text()
    out = {}
    for target in re.findall(r"^([a-z][a-z_-]*):", text, flags=re.M):
        verb = ROOT / "bin" / target
        summary = re.search(r"^# Summary:\s*(.+)$", verb.read_text(), flags=re.M) if verb.is_file() else None
        if summary:
            out[target] = summary.group(1)
    return out


def test_every_make_target_is_documented_and_every_documented_one_exists():
    targets = _makefile_targets()
    phony = set(re.findall(r"^\.PHONY:\s*(\S+)", (ROOT / "Makefile").read_text(), flags=re.M))
    assert phony == set(targets), "every .PHONY target needs a bin/ verb with a `# Summary:` line (and vice versa)"
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Make targets", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `make ([a-z-]+)(?=[ `])", table, flags=re.M))
    assert documented - set(targets) == set(), "README documents targets the Makefile lacks"
    assert set(targets) - documented == set(), "Makefile targets missing from README's table"


def _quick_start() -> str:
    return (ROOT / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]


FIRST_SCREEN = 25  # lines of README.md a terminal or a repository page shows before any scrolling


def _commands(text: str) -> list[str]:
    """The commands of text's ```bash blocks, comments dropped."""
    blocks = [b.split("```", 1)[0] for b in text.split("```bash")[1:]]
    return [line.split("#")[0].strip() for b in blocks for line in b.strip().splitlines()]


def test_the_first_screen_holds_the_two_commands_a_new_user_needs_and_no_key_step():
    """A newcomer reads one screen: `make rehearse` (it sets itself up, no key, no .env) and `make
    test`, as commands to copy. The quick start said "then fill in WANDB_API_KEY and
    DASHSCOPE_API_KEY" right above "the rehearsal needs no key", had `make test` only in prose, and
    opened with the requirement numbers and the SkillBank."""
    screen = "\n".join((ROOT / "README.md").read_text().splitlines()[:FIRST_SCREEN])
    problems = []
    if screen.count("```") != 2:
        problems.append("no whole code block on the first screen")
    commands = [c for c in _commands(screen) if c.startswith("make ")]
    if commands != ["make rehearse", "make test"]:
        problems.append(f"its commands are {commands}, not make rehearse and make test")
    rehearse = [line for line in screen.splitlines() if line.startswith("make rehearse")]
    if not (rehearse and "sets itself up" in rehearse[0] and "first time" in rehearse[0]):
        problems.append(f"make rehearse does not say it sets itself up the first time: {rehearse}")
    for step in (r"\w+_KEY\b", r"cp env/example\.env", r"fill in", r"\bM\d+\b", r"SkillBank"):
        problems += [f"{hit.group(0)!r} on the first screen" for hit in re.finditer(step, screen)][:1]
    assert not problems, "\n".join(problems)


def test_the_quick_start_rehearses_then_creates_env_for_the_real_run():
    """The Quick start top to bottom: the rehearsal and the tests (any machine, no .env), then
    for the real run the .env (the command env/example.env gives), doctor and train; every command
    it names exists."""
    quick = _quick_start()
    create = "cp env/example.env .env && chmod 600 .env"
    assert create in (ROOT / "env" / "example.env").read_text()
    commands = _commands(quick)
    order = ["make rehearse", "make test", create, "make doctor", "make train"]
    assert [c for c in commands if c in order] == order, commands
    targets = _makefile_targets()
    for cmd in re.findall(r"make ([a-z-]+)", quick):
        assert cmd in targets, cmd


def test_the_quick_start_lists_what_a_real_run_needs_by_its_knobs():
    """What a real run needs before `make train` (the conda envs, the models, the checkouts, the
    task files, a data disk), each with the knob that points at it."""
    from pyhelpers.config.declarations import read_knobs

    quick, knobs = _quick_start(), read_knobs()
    needs = quick.split("A real run needs", 1)[1]
    for knob in ("CONDA_ROOT", "SLIME_ENV", "SHOPSIM_ENV", "SLIME_DIR", "SHOPSIM_DIR", "HF_MODEL", "TORCH_DIST_MODEL",
                 "TRAIN_TASKS", "VAL_TASKS", "DATA_DISK", "NUM_GPUS"):
        assert f"`{knob}`" in needs, knob
        assert knob in knobs, knob
    for fix in ("make convert-base", "make migrate-machine", "docs/training.md"):
        assert fix in needs, fix


def test_the_readme_explains_its_jargon_before_using_it():
    """M1..M20 cite docs/requirements.md, which the README says before the first one; every one
    cited is a row there; "the memo" (a document a user does not have) is never cited."""
    readme = (ROOT / "README.md").read_text()
    rows = set(re.findall(r"^\| (M\d+) \|", (ROOT / "docs" / "requirements.md").read_text(), flags=re.M))
    cited = re.finditer(r"\bM(\d+)\b", readme)
    first = next(cited)
    assert "docs/requirements.md" in readme[:first.start()], readme[max(0, first.start() - 300):first.end()]
    assert {m.group(0) for m in re.finditer(r"\bM\d+\b", readme)} <= rows
    for text in (readme, (ROOT / "Makefile").read_text()):
        assert not re.search(r"\bthe memo\b|\bmemo's\b", text, flags=re.I)


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
    assert not hits, "\n".join(hits)


def test_no_knob_text_or_document_cites_an_issue_number():
    """A user has no issue tracker: "(GPU time; issue 29)" under a knob told them nothing. Knob
    texts (the menu's, the README's table), the README and docs/ say what a thing buys instead."""
    import subprocess

    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "*.md", "env/*.env"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\0")
    files = [f for f in files if f]
    assert "README.md" in files and "env/defaults.env" in files and "docs/architecture.md" in files
    cites = re.compile(r"\bissues? #?\d+", flags=re.I)
    hits = [f"{f}:{n}: {line.strip()}" for f in files
            for n, line in enumerate((ROOT / f).read_text().splitlines(), 1) if cites.search(line)]
    assert not hits, "\n".join(hits)
