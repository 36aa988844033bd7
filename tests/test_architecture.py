"""docs/architecture.md §2 is true: the import graph, drawn from the code with ast, has no circle,
every import between packages goes down the document's layers (or is an upward arrow the document
lists with its reason), and every import inside a function says why it is there.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "pyhelpers"
DOC = ROOT / "docs" / "architecture.md"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The project modules an import statement loads (the deepest existing module of each name)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            package = module if MODULES[module].name == "__init__.py" else module.rsplit(".", 1)[0]
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        names = [f"{source}.{a.name}" for a in node.names]
    out = []
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != module and name.startswith("pyhelpers"):
            out.append(name)
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports: top-level, local and TYPE_CHECKING imports alike."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[module].update(_targets(module, node))
    return graph


def package(module: str) -> str:
    """pyhelpers.stages.train -> stages; pyhelpers.errors -> errors."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "pyhelpers"


def _doc_block(marker: str) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    m = re.search(rf"<!-- {marker} -->\n(.*?)<!-- /{marker} -->", text, re.S)
    assert m, f"docs/architecture.md has no <!-- {marker} --> block: the test reads the layers from it"
    return [line for line in m.group(1).splitlines() if line.strip() and not line.startswith("```")]


def doc_layers() -> dict[str, int]:
    """package -> its layer, from the document's layer diagram (top line = highest layer)."""
    rows = [re.findall(r"[\w_]+", line.split("#")[0]) for line in _doc_block("layers")]
    ranks = {}
    for rank, names in enumerate(reversed([r for r in rows if r])):
        for name in names:
            assert name not in ranks, f"docs/architecture.md lists package {name} in two layers"
            ranks[name] = rank
    return ranks


def doc_upward() -> set[tuple[str, str]]:
    """(importing module, imported module) pairs the document allows to run back up."""
    pairs = set()
    for line in _doc_block("upward"):
        cells = [c.strip(" `") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("pyhelpers."):
            assert len(cells[2]) > 20, f"docs/architecture.md: say why {cells[0]} -> {cells[1]} runs back up"
            pairs.add((cells[0], cells[1]))
    return pairs


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_module_imports_itself_back_through_others():
    circles = _cycles(import_graph())
    assert not circles, "import circles (break each: move the shared part down a layer):\n" + "\n".join(
        " <-> ".join(c) for c in circles)


def test_every_package_sits_in_one_documented_layer():
    ranks = doc_layers()
    packages = {package(m) for m in MODULES} - {"pyhelpers"}
    assert sorted(packages - set(ranks)) == [], "packages missing from docs/architecture.md's layers"
    assert sorted(set(ranks) - packages) == [], "docs/architecture.md's layers name packages that do not exist"


def test_imports_go_down_the_layers_or_are_documented_upward_arrows():
    ranks, allowed, graph = doc_layers(), doc_upward(), import_graph()
    wrong, used = [], set()
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            a, b = package(module), package(target)
            if a == b or "pyhelpers" in (a, b):
                continue
            if ranks[a] > ranks[b]:
                continue
            if (module, target) in allowed:
                used.add((module, target))
                continue
            kind = "up" if ranks[a] < ranks[b] else "sideways"
            wrong.append(f"{module} -> {target} ({kind}: layer {ranks[a]} -> {ranks[b]})")
    assert not wrong, "imports against docs/architecture.md §2's layers:\n" + "\n".join(wrong)
    assert len(allowed) <= 2, "architecture: at most two arrows may run back up"
    assert used == allowed, f"docs/architecture.md lists upward arrows the code no longer has: {sorted(allowed - used)}"


def _local_imports(path: Path):
    lines = path.read_text(encoding="utf-8").splitlines()
    for fn in ast.walk(ast.parse("\n".join(lines))):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node, lines


def test_every_local_import_says_why():
    """A function-level import carries a one-line reason on its line, or on the comment line just
    above the group of imports it belongs to (architecture §2)."""
    silent = []
    for path in MODULES.values():
        for node, lines in _local_imports(path):
            i = node.lineno - 1
            while i > 0 and lines[i - 1].strip().startswith(("from ", "import ")) and "#" not in lines[i]:
                i -= 1  # walk up a block of consecutive imports to its first line
            whole = lines[node.lineno - 1:node.end_lineno]  # a parenthesised import may say it inside
            said = "#" in lines[i] or lines[i - 1].strip().startswith("#") or any("#" in x for x in whole)
            if not said:
                silent.append(f"{path.relative_to(ROOT)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    assert not silent, "local imports without a reason (move them to the top, or say why):\n" + "\n".join(silent)
