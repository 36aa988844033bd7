"""The house rules of issue 43 that the code itself can be asked about: a module holds one purpose
in at most MAX_LINES lines, "is this a multi-node run?" is asked one way, and a module is imported
under its own name (each kept renaming with its reason in tests/renamed_imports.txt)."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "pyhelpers"
MAX_LINES = 400
# Modules allowed past MAX_LINES, each with why.
LONG_MODULES = {
    "pyhelpers/config/knobs.py": "generated from env/defaults.env (make readme-knobs): one block per knob",
}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_the_data_folder_holds_no_python_tool():
    """env/ holds the configuration and the facts of the pinned stack; a tool that writes them lives
    with the code that reads them, under pyhelpers/ (as config/generate.py writes config/knobs.py)."""
    tools = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "env").rglob("*.py"))]
    assert not tools, "Python tools in the data folder env/ (move each under pyhelpers/):\n" + "\n".join(tools)


def test_no_module_is_longer_than_the_house_allows():
    long = [f"{p.relative_to(ROOT)}: {n} lines" for p in _modules()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
            and str(p.relative_to(ROOT)) not in LONG_MODULES]
    assert not long, f"modules over {MAX_LINES} lines (split each by purpose):\n" + "\n".join(long)


# "Is this a multi-node run?" has one answer, the Config's derived `multinode` (config/load.py: a
# derived value, as run_dir is, so every layer asks it, config/ray_ports.py and the rollout plugin's
# settings included, which sit below launch/). Modules that may compare NNODES with 1 or 2 themselves:
MULTINODE_ASKED_INLINE = {
    "pyhelpers/config/load.py": "where the answer is defined",
    "pyhelpers/config/check.py": "validates NNODES itself, from the raw values, before a Config's typed read is safe",
}


def _is_nnodes(node: ast.AST) -> bool:
    """cfg.NNODES, cfg.int("NNODES"), or a local named nnodes."""
    if isinstance(node, ast.Attribute):
        return node.attr == "NNODES"
    if isinstance(node, ast.Name):
        return node.id == "nnodes"
    return isinstance(node, ast.Call) and any(isinstance(a, ast.Constant) and a.value == "NNODES" for a in node.args)


def inline_multinode_tests(path: Path, root: Path = ROOT) -> list[str]:
    """Each comparison of NNODES with 1 or 2 in a module: a re-implementation of `cfg.multinode`."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out = []
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_nnodes(s) for s in sides) and any(isinstance(s, ast.Constant) and s.value in (1, 2)
                                                          for s in sides):
                out.append(f"{path.relative_to(root)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return out


def test_a_multinode_run_is_recognised_one_way():
    inline = [hit for p in _modules() if str(p.relative_to(ROOT)) not in MULTINODE_ASKED_INLINE
              for hit in inline_multinode_tests(p)]
    assert not inline, "NNODES compared inline (ask `cfg.multinode`, config/load.py):\n" + "\n".join(inline)


def test_the_inline_test_finder_finds_each_spelling(tmp_path):
    """The finder above is what makes the rule hold: it must see every spelling the code used."""
    probe = tmp_path / "probe.py"
    probe.write_text("a = cfg.NNODES > 1\nb = cfg.int('NNODES') > 1\nnnodes = cfg.NNODES\nc = nnodes == 1\n"
                     "d = cfg.NNODES < 2\ne = cfg.multinode\nf = len(up) < nnodes\n")
    hits = [h.split(":")[1] for h in inline_multinode_tests(probe, tmp_path)]
    assert hits == ["1", "2", "4", "5"], hits



# A module is imported under its own name (issue 43: at most 10 renamings in the end, each with its
# reason). tests/renamed_imports.txt lists those kept, one line each: FILE | IMPORT | WHY. The list
# only shrinks: a renaming added fails, and so does a line whose import is gone (delete the line).
RENAMED_LIST = ROOT / "tests" / "renamed_imports.txt"
RENAMED_CEILING = 6  # issue 43: 187 on main b6e9b54, 26 on f1aabca; the 6 left are numpy/matplotlib conventions


def renamed_imports(files: list[Path], root: Path = ROOT) -> list[tuple[str, str]]:
    """(file, `import a.b as c` / `from a import b as c`) for each name imported under another name."""
    out = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for alias in node.names:
                if not alias.asname or alias.asname == alias.name.rpartition(".")[2]:
                    continue
                if isinstance(node, ast.Import):
                    text = f"import {alias.name} as {alias.asname}"
                else:
                    text = f"from {'.' * node.level}{node.module or ''} import {alias.name} as {alias.asname}"
                out.append((str(path.relative_to(root)), text))
    return sorted(out)


def _python_files() -> list[Path]:
    return sorted(p for top in ("pyhelpers", "tests", "bench") for p in (ROOT / top).rglob("*.py"))


def _kept() -> list[tuple[str, str, str]]:
    rows = []
    for n, line in enumerate(RENAMED_LIST.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip() and not line.startswith("#"):
            cells = [c.strip() for c in line.split("|")]
            assert len(cells) == 3 and len(cells[2]) >= 10, f"{RENAMED_LIST.name}:{n}: write FILE | IMPORT | WHY"
            rows.append(tuple(cells))
    return rows


def test_a_module_is_imported_under_its_own_name_or_the_list_says_why():
    found = renamed_imports(_python_files())
    kept = sorted((f, imp) for f, imp, _ in _kept())
    added = [f"{f}: {imp}" for f, imp in found if found.count((f, imp)) > kept.count((f, imp))]
    gone = [f"{f} | {imp}" for f, imp in kept if kept.count((f, imp)) > found.count((f, imp))]
    assert not added, ("renamed imports (import the module under its own name; if it cannot be, add "
                       f"FILE | IMPORT | WHY to {RENAMED_LIST.name}):\n" + "\n".join(sorted(set(added))))
    assert not gone, f"{RENAMED_LIST.name} keeps imports no longer renamed (delete these lines):\n" + "\n".join(gone)
    assert len(kept) <= RENAMED_CEILING, f"{len(kept)} renamed imports: the list grew past {RENAMED_CEILING}"


def test_the_renamed_import_finder_sees_each_form(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import numpy as np\nimport a.b as b\nfrom x import y as z\nfrom . import m as n\n"
                     "from p import q as q\nimport os\n")
    assert [imp for _, imp in renamed_imports([probe], tmp_path)] == [
        "from . import m as n", "from x import y as z", "import numpy as np"]
