"""Each knob is declared once, in env/defaults.env (issue 43): its type and range, default, text,
whether a resume may change it, whether bash reads it, whether the rollout plugin sees it and
whether it is a secret. Everything else -- the typed attribute, run.json's resume rule, bash's
exports, the plugin's settings, README's table, the menu -- is derived from that declaration, and
no code states a knob's default a second time.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

from pyhelpers.config.load import read_knobs

PACKAGE = ROOT / "pyhelpers"


def _literal(node: ast.AST | None):
    try:
        return ast.literal_eval(node) if node is not None else None
    except ValueError:
        return None  # a name or an expression: not a literal default


def _is_dataclass(cls: ast.ClassDef) -> bool:
    def name(d: ast.AST) -> str:
        d = d.func if isinstance(d, ast.Call) else d
        return d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", "")

    return any(name(d) == "dataclass" for d in cls.decorator_list)


def _field_defaults(tree: ast.AST) -> list[tuple[int, str, object]]:
    """(line, field, default) of each dataclass field with a literal default (`= x` or `field(default=x)`)."""
    out = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and _is_dataclass(n)):
        for stmt in cls.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value):
                continue
            value = stmt.value
            if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "field":
                value = next((k.value for k in value.keywords if k.arg == "default"), None)
            out.append((stmt.lineno, f"{cls.name}.{stmt.target.id}", _literal(value)))
    return out


def _option_defaults(tree: ast.AST) -> list[tuple[int, str, object]]:
    """(line, option, default) of each argparse `add_argument` and click `option` with a default."""
    out = []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
        if call.func.attr not in ("add_argument", "option"):
            continue
        default = next((k.value for k in call.keywords if k.arg == "default"), None)
        names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if default is None or not names:
            continue
        dest = next((n for n in names if not n.startswith("-")), max(names, key=len))
        out.append((call.lineno, dest.lstrip("-").replace("-", "_"), _literal(default)))
    return out


def _same(value: object, default: str) -> bool:
    """A code default equal to a knob's declared one (numbers by value, a flag's 0|1 as a bool)."""
    if value is None or value == "" or default == "":
        return False
    if isinstance(value, (bool, int, float)):
        try:
            return float(value) == float(default)
        except ValueError:
            return False
    return str(value) == default


def _could_be(value: object, knob) -> bool:
    """`value` is a value of the knob's declared type (an episode's `reward = 0.0` is no REWARD)."""
    text = str(int(value)) if isinstance(value, bool) else "" if value is None else str(value)
    return knob.type is None or knob.type.problem(text) is None


def shadowed(name: str, value: object, knobs) -> str | None:
    """The knob a code default restates: the knob of that very name (any value it could hold), or
    one whose name holds every word of it and whose default is the same value (GateKnobs.pairs =
    256 beside GATE_PAIRS=256)."""
    bare = name.rsplit(".", 1)[-1].strip("_")
    words = set(bare.lower().split("_"))
    for knob in knobs.values():
        if bare.upper() == knob.name and _could_be(value, knob):
            return knob.name
        if words <= set(knob.name.lower().split("_")) and _same(value, knob.default):
            return knob.name
    return None


def test_no_dataclass_field_or_option_restates_a_knob_default():
    """A default written beside env/defaults.env is a second source: change SKILL_DUP_JACCARD there
    and the code silently disagrees. The groupings (GateKnobs, CompileOptions, PluginSettings) are
    built from the resolved Config with no default of their own; a program the toolkit starts gets
    the value on its command line."""
    knobs = read_knobs()
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "knobs.py" and path.parent.name == "config":
            continue  # generated from the declarations themselves
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for line, name, value in _field_defaults(tree) + _option_defaults(tree):
            if knob := shadowed(name, value, knobs):
                found.append(f"{path.relative_to(ROOT)}:{line}: {name} = {value!r} restates {knob}")
    assert not found, f"{len(found)} knob defaults restated in code:\n" + "\n".join(found)


def test_the_restated_default_finder_finds_one():
    """The finder above is not blind: it reads a restated default in each of its three shapes."""
    knobs = read_knobs()
    tree = ast.parse("@dataclass\nclass G:\n    pairs: int = 256\n    seed: int = field(default=1234)\n"
                     "    power: float = 0.8\n    reward: float = 0.0\n    max_turns: int = 9\n"
                     "p.add_argument('--host', default='127.0.0.1')\n"
                     "click.option('--dup-jaccard', default=0.7)\n")
    got = [(name, shadowed(name, value, knobs)) for _, name, value in _field_defaults(tree) + _option_defaults(tree)]
    assert got == [("G.pairs", "GATE_PAIRS"), ("G.seed", "GATE_SEED"), ("G.power", None),
                   ("G.reward", None), ("G.max_turns", "MAX_TURNS"),
                   ("host", "SHOPSIM_HOST"), ("dup_jaccard", "SKILL_DUP_JACCARD")], got


# --- a throwaway knob, declared once, in a copy of the project -------------------------------------

THROWAWAY = """
## Throwaway (tests/test_knob_declaration.py)
# A knob the test declares and nothing else: fixed for a run, read by bash, seen by the plugin.
#: int >= 2; fixed, bash, plugin
THROWAWAY_WIDGETS=7
# A machine's own path: left out of run.json.
#: path; machine
THROWAWAY_CACHE=/var/cache/throwaway
# A secret without a secret's name (masked, never exported, recorded or handed on).
#: text or empty; secret
THROWAWAY_PASSPHRASE=
"""

CHECKS = r'''
import json, sys
from pathlib import Path
from click.testing import CliRunner
from pyhelpers.cli import main
from pyhelpers.config import load as config_mod
from pyhelpers.config.check import check
from pyhelpers.overview import manifest
from pyhelpers.rollout import settings
from pyhelpers.run.layout import from_config

out = {}
cfg = config_mod.load()
out["typed"] = [cfg.THROWAWAY_WIDGETS, type(cfg.THROWAWAY_WIDGETS).__name__, str(cfg.THROWAWAY_CACHE)]
out["range"] = [str(p) for p in check(config_mod.load({**cfg.values, "THROWAWAY_WIDGETS": "1"})) if "THROWAWAY" in str(p)]
out["secret"] = [cfg.THROWAWAY_PASSPHRASE, cfg.public()["THROWAWAY_PASSPHRASE"]]
run = manifest.build(cfg)
out["run.json"] = sorted(k for k in run["config"] if k.startswith("THROWAWAY"))
changed = manifest.build(config_mod.load({**cfg.values, "THROWAWAY_WIDGETS": "9", "THROWAWAY_CACHE": "/elsewhere"}))
out["resume"] = manifest.differences(run, changed)
exported = CliRunner().invoke(main, ["config", "export"]).output
out["export"] = [ln for ln in exported.splitlines() if ln.startswith("export THROWAWAY")]
out["secret"].append(cfg.THROWAWAY_PASSPHRASE in exported + json.dumps(run))
lay = from_config(cfg)
values = settings.plugin_values(cfg, lay, 0)
out["plugin"] = [values.get("throwaway_widgets"), settings.from_mapping(values).throwaway_widgets,
                 "shopsimrl_throwaway_widgets" in settings.yaml_keys()]
print(json.dumps(out))
'''


def _copy_of_the_project(dest: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                            "Makefile", "README.md", "bin", "env", "pyhelpers"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    for rel in files:
        if (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    (dest / ".venv").symlink_to(ROOT / ".venv")
    return dest


def test_a_knob_declared_once_reaches_every_place_that_uses_it(toolkit_env, tmp_path):
    """Adding a knob: its lines in env/defaults.env, `make readme-knobs`, use it. In a copy of the
    project, three throwaway knobs declared that way reach the typed Config, `make check`'s range
    check, README's table, the menu, run.json's resume rule, bash's exports and the rollout
    plugin's settings, each as declared -- no other file edited."""
    copy = _copy_of_the_project(tmp_path / "project")
    with open(copy / "env" / "defaults.env", "a", encoding="utf-8") as f:
        f.write(THROWAWAY)
    env = {**toolkit_env, "PYTHONPATH": str(copy), "COLUMNS": "200"}
    Path(toolkit_env["SHOPSIMRL_ENV_FILE"]).write_text("THROWAWAY_PASSPHRASE=open-sesame-7f3a\n")
    regen = subprocess.run([str(copy / "bin" / "readme-knobs")], cwd=copy, env=env, capture_output=True, text=True)
    assert regen.returncode == 0, regen.stdout + regen.stderr

    readme = (copy / "README.md").read_text()
    assert "| `THROWAWAY_WIDGETS` | `7` | `int >= 2` |" in readme, readme[-3000:]
    menu = subprocess.run([str(copy / "bin" / "help")], cwd=copy, env=env, capture_output=True, text=True, check=True)
    assert "THROWAWAY_WIDGETS" in menu.stdout and "Throwaway" in menu.stdout, menu.stdout[-2000:]

    r = subprocess.run([sys.executable, "-c", CHECKS], cwd=copy, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.splitlines()[-1])
    assert got["typed"] == [7, "int", "/var/cache/throwaway"], got
    assert got["range"] and "THROWAWAY_WIDGETS" in got["range"][0], got
    assert got["secret"] == ["open-sesame-7f3a", "***", False], got  # masked, never exported or recorded
    assert got["run.json"] == ["THROWAWAY_WIDGETS"], got  # the machine's own path is left out
    assert got["resume"] == [["THROWAWAY_WIDGETS: '7' -> '9'"], []], got  # refused on resume
    assert got["export"] == ["export THROWAWAY_WIDGETS=7"], got
    assert got["plugin"] == [7, 7, True], got
