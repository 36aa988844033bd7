"""The configuration is one typed object (issue #26 item 3): its fields come from env/defaults.env's
`#:` lines through a generated module, and the code reads knobs as attributes of it. No string
lookup of a knob, no knob read from os.environ, outside pyhelpers/config/."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

from pyhelpers.config.declarations import read_knobs

PACKAGE = ROOT / "pyhelpers"
CONFIG = PACKAGE / "config"
# Variables read from os.environ below config/ that are not knobs, each with why it is read there.
# (A knob is a name declared in env/defaults.env; none of these is.)
NOT_KNOBS = {
    "CONDA_PREFIX": "set by `conda activate`; the doctor's probe reports which env it runs in",
    "CUDA_HOME": "set by the CUDA install; the doctor looks for nvcc under it",
    "LD_LIBRARY_PATH": "the loader's path in the probed env, reported by the doctor",
    "CUDNN_PATH": "set by the slime env; reported by the doctor",
    "HOME": "where ~/.netrc lives (W&B's login)",
    "PATH": "where programs are found",
    "MPLCONFIGDIR": "matplotlib's cache, kept off the system disk",
    "WANDB_BASE_URL": "W&B's own variable (.env or the environment): the host whose key the job's netrc holds",
    "SHOPSIM_ENV_MAX_NUM": "ShopSimulator's own variable: the launcher sets it for the fork it imports",
}


def _python_files_outside_config() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if CONFIG not in p.parents]


def _const(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_os_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and \
        isinstance(node.value, ast.Name) and node.value.id == "os"


def _is_sources(node: ast.Call | ast.Subscript) -> bool:
    target = node.func.value if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) else \
        getattr(node, "value", None)
    return isinstance(target, ast.Attribute) and target.attr == "sources"


def _string_lookups(tree: ast.AST, knobs: set[str]) -> list[tuple[int, str]]:
    """cfg.int("X"), cfg.get("X"), cfg.path("X"), cfg["X"], values["X"]...: a knob named by a string."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Call, ast.Subscript)) and _is_sources(node):
            continue  # cfg.sources["X"]: where a knob's value came from, not its value
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args and \
                node.func.attr in {"int", "float", "flag", "path", "get", "getenv"} and \
                _const(node.args[0]) in knobs:
            found.append((node.lineno, f".{node.func.attr}({_const(node.args[0])!r})"))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _const(node.slice) in knobs:
            found.append((node.lineno, f"[{_const(node.slice)!r}]"))
    return found


def test_no_knob_is_looked_up_by_its_name_outside_config():
    """A knob is an attribute of Config (cfg.ROUNDS, typed), never a string key: a typo is an
    AttributeError at import-checking time (ruff, mypy), and a rename finds every reader."""
    knobs = set(read_knobs())
    found = []
    for path in _python_files_outside_config():
        for line, what in _string_lookups(ast.parse(path.read_text(), str(path)), knobs):
            found.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert not found, f"{len(found)} string lookups of a knob outside pyhelpers/config/:\n" + "\n".join(found)


def _environ_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """os.environ["X"], os.environ.get("X"), os.getenv("X") with a constant name."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_os_environ(node.value):
            name = _const(node.slice)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args and (
                (node.func.attr in {"get", "setdefault"} and _is_os_environ(node.func.value))
                or (node.func.attr == "getenv" and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "os")):
            name = _const(node.args[0])
        else:
            continue
        if name is not None:
            found.append((node.lineno, name))
    return found


def test_nothing_below_config_reads_a_knob_from_the_environment():
    """A process the toolkit starts gets its knobs on its command line or from its parent's
    resolved Config, never with a default of its own from os.environ (one default: defaults.env)."""
    knobs = set(read_knobs())
    assert not knobs & set(NOT_KNOBS), "a name of the allow-list became a knob: remove it from NOT_KNOBS"
    found, unknown = [], []
    for path in _python_files_outside_config():
        for line, name in _environ_reads(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(ROOT)}:{line}: os.environ {name}"
            if name in knobs:
                found.append(where)
            elif name not in NOT_KNOBS and not name.startswith(("SHOPSIMRL_", "FAKE_")) and name.isupper():
                unknown.append(where)
    assert not found, "knobs read from os.environ outside pyhelpers/config/:\n" + "\n".join(found)
    assert not unknown, ("os.environ reads of names neither knobs nor in NOT_KNOBS (add each with its "
                         "reason):\n" + "\n".join(unknown))


def test_the_generated_knobs_module_matches_defaults_env():
    """pyhelpers/config/knobs.py is generated from env/defaults.env (`make config-knobs`): one source
    for each knob's name, type and doc. A knob added without regenerating fails here."""
    from pyhelpers.config import generate
    from pyhelpers.config.declarations import DEFAULTS_FILE, digest, parse_knobs

    module = CONFIG / "knobs.py"
    assert module.is_file(), "pyhelpers/config/knobs.py is missing: run `make readme-knobs`"
    assert module.read_text() == generate.source(parse_knobs(DEFAULTS_FILE), digest(DEFAULTS_FILE)), \
        "pyhelpers/config/knobs.py is stale: run `make readme-knobs` and commit it"


def test_each_knob_is_a_typed_attribute_of_config():
    """Every knob reads as its declared type: int, float, bool (flag), Path (path; None when an
    `or empty` path is empty), str otherwise."""
    import typing

    from pyhelpers.config.knobs import Knobs
    from pyhelpers.config.load import Config, load

    cfg = load(environ={"SHOPSIM_SLOTS": "7", "SAVE_HF": "1", "SEED_BANK": "", "GATE_ALPHA": "0.1"})
    assert isinstance(cfg, Knobs)
    assert cfg.SHOPSIM_SLOTS == 7 and cfg.SAVE_HF is True and cfg.SEED_BANK is None and cfg.GATE_ALPHA == 0.1
    assert cfg.RUNS_DIR == ROOT / "runs"
    hints = {name: typing.get_type_hints(Knobs.__dict__[name].func)["return"] for name in read_knobs()}
    expected = {"int": int, "float": float, "flag": bool, "path": Path}
    for name, knob in read_knobs().items():
        kind = knob.type.kind if knob.type else "text"
        want = expected.get(kind, str)
        if kind == "path" and knob.type.text.endswith("or empty"):
            want = Path | None
        assert hints[name] == want, (name, hints[name], want)
        value = getattr(cfg, name)
        assert value is None or isinstance(value, Path if want == Path | None else want), name
    try:
        cfg.ROUNDS = 3  # type: ignore[misc]
    except AttributeError:
        pass
    else:
        raise AssertionError("Config must be immutable")
    assert Config is type(cfg)


def test_one_command_parses_defaults_env_once(toolkit_env, tmp_path):
    """`config export` (every bin/ script's first step) resolves, checks and prints the configuration
    from one parse of env/defaults.env, not one per reader (SHOPSIMRL_PARSE_LOG: tests/fakes/README.md)."""
    import subprocess
    import sys

    log = tmp_path / "parses.log"
    r = subprocess.run([sys.executable, "-m", "pyhelpers", "config", "export"], cwd=ROOT, capture_output=True,
                       text=True, env={**toolkit_env, "SHOPSIMRL_PARSE_LOG": str(log)})
    assert r.returncode == 0, r.stderr
    parses = log.read_text().splitlines() if log.exists() else []
    assert len(parses) <= 1, f"{len(parses)} parses of env/defaults.env in one `config export`: {parses}"


def test_an_edited_defaults_file_is_parsed_not_taken_from_the_generated_module(tmp_path):
    """knobs.py's declarations stand for env/defaults.env only while the file has their digest: a
    changed default (a developer who has not regenerated yet) is read from the file itself."""
    from pyhelpers.config.declarations import DEFAULTS_FILE

    edited = tmp_path / "defaults.env"
    edited.write_text(DEFAULTS_FILE.read_text().replace("\nROUNDS=5\n", "\nROUNDS=7\n"))
    assert read_knobs(DEFAULTS_FILE)["ROUNDS"].default == "5"
    assert read_knobs(edited)["ROUNDS"].default == "7"
    assert read_knobs(edited)["ROUNDS"].type == read_knobs(DEFAULTS_FILE)["ROUNDS"].type
