"""docs/architecture.md says what is so (issue 43): each checkable sentence -- a file or a name it
points at, a count, a list, a rule -- is read from the document and compared with the code, so the
two cannot drift apart unseen. tests/test_architecture.py checks §2's layers and import rules; this
file checks the rest. A sentence reworded so that its pattern below no longer finds it fails too:
reword the pattern with it, so the claim stays checked.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import test_architecture
import test_house_rules
import test_knob_declaration
import test_stage_registry
from conftest import ROOT

from pyhelpers import stages
from pyhelpers.cli import config_cmd
from pyhelpers.config import declarations, facts, load
from pyhelpers.launch import node_agent

DOC = ROOT / "docs" / "architecture.md"
TEXT = DOC.read_text(encoding="utf-8")
PROSE = " ".join(TEXT.split())  # the document's words, whatever its line breaks
PACKAGE = ROOT / "pyhelpers"
TOP_DIRS = {"bin", "bench", "docs", "env", "pyhelpers", "tests"}
# Paths the document names that are no file of the project, each with what it is.
NOT_PROJECT_FILES = {
    "bin/T": "the make target T of 'To add a make target'",
    "train.py": "slime's own train.py (slime 624b824), which the Ray job runs",
    "gate/decisions.json": "a round's file (runs/<RUN>/rounds/round-NNN/gate/)",
}


def said(pattern: str) -> re.Match:
    """The document's sentence that `pattern` finds (in PROSE); a missing one fails, naming it."""
    m = re.search(pattern, PROSE)
    assert m, f"docs/architecture.md no longer says /{pattern}/: reword this test's pattern with the claim"
    return m


# --- what the document points at exists --------------------------------------------------------

_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)+[\w.-]*\w|[\w-]+\.(?:py|sh|md|env)(?!\w))(:\d[\d,-]*)?(/\*)?")


def _project_paths() -> dict[str, str]:
    """Each path of the project the document names -> the text naming it: one under a top directory
    of the checkout or a package of pyhelpers (`config/load.py`, `stages/position.position`), or a
    bare file name; not a file of a run (`round-r/skillbank.json`), of upstream (`slime/...:402`) or
    a metric's name (`rollout/shopsim/*`)."""
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir()} | {p.stem for p in PACKAGE.glob("*.py")}
    out = {}
    for m in _PATH.finditer(TEXT):
        path, line, glob = m.groups()
        first = path.split("/")[0]
        if glob or (line and first not in TOP_DIRS | packages):
            continue
        if "/" in path and first not in TOP_DIRS | packages | {".."}:
            continue
        out.setdefault(path, m.group(0))
    return out


def _resolve(path: str) -> Path | None:
    for base in (ROOT, PACKAGE, ROOT / "docs"):
        for candidate in (base / path, base / f"{path}.py"):
            if candidate.exists():
                return candidate
    return None


def _module_attribute(path: str) -> bool:
    """`cli/__init__.GROUPS`, `stages/position.position`: a module of pyhelpers and a name it has."""
    module, _, name = path.rpartition(".")
    if not name.isidentifier() or _resolve(module) is None:
        return False
    dotted = "pyhelpers." + module.removesuffix("/__init__").replace("/", ".")
    return hasattr(importlib.import_module(dotted), name)


def test_every_file_and_module_the_document_names_exists():
    paths = _project_paths()
    assert len(paths) > 40, f"the finder lost the document's paths: {sorted(paths)}"
    missing = [f"{text}" for path, text in sorted(paths.items())
               if path not in NOT_PROJECT_FILES and _resolve(path) is None and not _module_attribute(path)]
    assert not missing, "docs/architecture.md names files or modules that do not exist:\n" + "\n".join(missing)


# --- its counts and lists are the code's ---------------------------------------------------------

def _backticked(text: str) -> tuple[str, ...]:
    return tuple(re.findall(r"`([^`]+)`", text))


def test_the_facts_a_knob_may_declare_are_those_facts_py_parses():
    listed = said(r"The facts \(`config/facts.py`\) say what else a knob is: (.*?) A name ending").group(1)
    assert _backticked(re.sub(r"\([^()]*\)", "", listed)) == facts.FACTS  # each fact, not its explanation


def test_the_secret_name_endings_are_those_the_code_treats_as_secret():
    listed = said(r"variables ending in (.*?) \(plus SECRET_VARS\)").group(1)
    assert _backticked(listed) == facts.SECRET_SUFFIXES


def test_a_workers_ray_start_attempts_are_counted_right():
    assert int(said(r"started again \((\d+) attempts\)").group(1)) == node_agent.START_ATTEMPTS


def test_the_knob_declaration_test_declares_as_many_throwaway_knobs_as_said():
    words = {"two": 2, "three": 3, "four": 4, "five": 5}
    said_count = words[said(r"tests/test_knob_declaration.py declares (\w+) throwaway knobs").group(1)]
    assert len(re.findall(r"^THROWAWAY_\w+=", test_knob_declaration.THROWAWAY, re.M)) == said_count


def test_the_requirement_ids_run_as_far_as_said():
    last = int(said(r"Requirement ids \(M1…M(\d+)\)").group(1))
    ids = {int(n) for n in re.findall(r"\bM(\d+)\b", (ROOT / "docs" / "requirements.md").read_text(encoding="utf-8"))}
    assert max(ids) == last and ids == set(range(1, last + 1)), sorted(ids)


def test_the_default_named_as_the_default_is_the_default():
    name, value = said(r"With (\w+)=(\w+) \(the default\)").groups()
    assert declarations.read_knobs()[name].default == value


def test_the_round_gpu_idle_bench_runs_as_many_configurations_as_said():
    words = {"four": 4, "five": 5, "six": 6, "seven": 7}
    count = words[said(r"in the (\w+) configurations: today's order").group(1)]
    tree = ast.parse((ROOT / "bench" / "round_gpu_idle.py").read_text(encoding="utf-8"))
    configs = next(n.value for n in tree.body if isinstance(n, ast.Assign)
                   and any(isinstance(t, ast.Name) and t.id == "CONFIGS" for t in n.targets))
    assert len(configs.keys) == count


def test_make_tests_measured_time_is_the_readmes():
    figure = said(r"`make test`'s budget is 10 minutes on 2 cores .*?, not met today: (\d+:\d\d) of pytest").group(1)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"({figure} of pytest" in readme, f"README's make test row does not give {figure}"


# --- its rules hold ------------------------------------------------------------------------------

def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module.split(".")[0])
    return out


def _importers(top: str) -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py") if top in _imports(p))


def test_only_the_cli_imports_click():
    said(r"cli/ the click commands .*? the only package that imports click")
    assert [p for p in _importers("click") if not p.startswith("pyhelpers/cli/")] == []


def test_one_module_parses_dotenv_files():
    where = said(r"One parser \(python-dotenv, in `([\w/.]+)`\)").group(1)
    assert _importers("dotenv") == [f"pyhelpers/{where}"]


def test_config_export_gives_bash_the_knobs_declared_bash(toolkit_env):
    said(r"bash gets the checked values it reads \(the knobs declared `bash`, the derived RUN_DIR, SAVE_DIR")
    knobs = declarations.read_knobs()
    exported = set(config_cmd._for_bash(load.load(toolkit_env), with_secrets=False))
    assert exported & set(knobs) == {n for n, k in knobs.items() if k.has("bash")}
    assert {"RUN_DIR", "SAVE_DIR"} <= exported


def test_the_run_lock_is_held_by_a_coprocess_that_dies_with_the_script():
    said(r"The run lock \(flock on the run's `lock`\) is held for bin/train by a coprocess, `pyhelpers proc "
         r"hold-lock` \(bin/lib.sh take_run_lock\), that the kernel kills when the script dies")
    lib = (ROOT / "bin" / "lib.sh").read_text(encoding="utf-8")
    take = lib[lib.index("take_run_lock() {"):]
    assert re.search(r"coproc \w+ \{ exec .* proc hold-lock ", take[:take.index("\n}")]), "take_run_lock"
    assert re.search(r"^take_run_lock\b", (ROOT / "bin" / "train").read_text(encoding="utf-8"), re.M)
    hold = ast.parse((PACKAGE / "cli" / "proc_cmd.py").read_text(encoding="utf-8"))
    body = next(f for f in ast.walk(hold) if isinstance(f, ast.FunctionDef) and f.name == "proc_hold_lock")
    assert "family.die_with_parent()" in ast.unparse(body), "hold-lock no longer dies with the script"


def test_no_stage_imports_another_and_only_the_registry_imports_a_stage():
    said(r"no stage imports another, and only the registry imports a stage")
    graph = test_architecture.import_graph()
    stage_modules = {f"pyhelpers.stages.{n}" for n in stages.ALL_NAMES}
    wrong = [f"{m} -> {t}" for m, targets in sorted(graph.items()) for t in sorted(targets & stage_modules)
             if m != "pyhelpers.stages"]
    assert not wrong, "stage modules imported outside the registry:\n" + "\n".join(wrong)


# Who §4 says reads the registry and names no stage, as the document words each.
READERS = {"the loop": "pyhelpers/loop/loop.py", "resume (`stages/position`: the round's last stage ends it)":
           "pyhelpers/stages/position.py", "the preflight (`stages/preflight`)": "pyhelpers/stages/preflight.py",
           "ETAs (`stages/progress`)": "pyhelpers/stages/progress.py", "`make plan`": "pyhelpers/overview/plan.py",
           "`make status`": "pyhelpers/overview/status.py", "`make logs`": "pyhelpers/cli/run_ops_cmd.py",
           "the disk guard": "pyhelpers/capacity/diskguard.py", "the report": "pyhelpers/report"}
# A stage's name written in a reader that is no stage there, with why.
NOT_A_STAGE = {**test_stage_registry.NOT_A_STAGE,
               ("pyhelpers/overview/status.py", "baseline"): "the results row of the base model (evaluate/results)"}


def test_the_registrys_readers_name_no_stage():
    named = said(r"That is all the code: (.*?) read the registry and name no stage").group(1)
    assert named == ", ".join(list(READERS)[:-1]) + " and " + list(READERS)[-1], named
    found = []
    for entry in READERS.values():
        base = ROOT / entry
        for path in sorted(base.rglob("*.py")) if base.is_dir() else [base]:
            rel = str(path.relative_to(ROOT))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and node.value in stages.ALL_NAMES \
                        and (rel, node.value) not in NOT_A_STAGE:
                    found.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert not found, "stage names written where the document says none is (read stages.*):\n" + "\n".join(found)


def test_the_line_limit_said_is_the_one_tested():
    assert int(said(r"a module holds at most (\d+) lines").group(1)) == test_house_rules.MAX_LINES
