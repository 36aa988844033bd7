"""The knobs' declarations: env/defaults.env, each knob with its doc, its `#:` type and facts and its
default, taken from the generated knobs.py while the file still has the digest it was generated
from; and the one dotenv parser (python-dotenv) that reads it and the project's .env (load.py).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from pyhelpers.config import facts, types
from pyhelpers.config.knobs import DECLARED, SOURCE_SHA256
from pyhelpers.config.types import KnobType
from pyhelpers.errors import ToolkitError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULTS_FILE = PROJECT_ROOT / "env" / "defaults.env"
_SENTENCE_ENDS = (".", "?", ":", ".)")


@dataclass(frozen=True)
class Knob:
    """One declared knob: its name, raw default, doc comment, section, its type and range (the
    `#:` line above it; None when the file lacks one, which tests/test_config_knobs.py refuses),
    the facts after the type (facts.py) and its brief (the doc up to the first comment line that
    ends a sentence: the menu's text)."""

    name: str
    default: str
    doc: str
    section: str
    type: KnobType | None = None
    facts: frozenset[str] = frozenset()
    brief: str = ""

    def has(self, fact: str) -> bool:
        """Whether the declaration says `fact` (one of facts.FACTS: a misspelt one is a bug)."""
        assert fact in facts.FACTS, fact
        return fact in self.facts


_PARSED: dict[tuple[str, int, int], tuple[str, dict[str, Knob]]] = {}


def read_knobs(path: Path = DEFAULTS_FILE) -> dict[str, Knob]:
    """Declared knobs, in file order, with the comment lines above each as its doc and the `#:`
    line as its type and facts. A `#:` line that is not a type stops here, naming file and line.

    The file is parsed when the declarations generated from it into knobs.py are not its own
    (another file, or it changed since `make readme-knobs`: their digests differ), and then once
    per process and version of the file."""
    return dict(declarations(Path(path))[1])


def declarations(path: Path) -> tuple[str, dict[str, Knob]]:
    """(the file's digest, its knobs), once per process and version of the file."""
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _PARSED:
        sha = digest(path)
        _PARSED[key] = (sha, generated_knobs() if sha == SOURCE_SHA256 else parse_knobs(path))
    return _PARSED[key]


def digest(path: Path) -> str:
    """sha256 of a declarations file: which file knobs.py was generated from."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def generated_knobs() -> dict[str, Knob]:
    """The declarations knobs.py holds (those of env/defaults.env when it was generated)."""
    return {name: Knob(name, default, doc=doc, section=section, brief=brief, facts=frozenset(declared),
                       type=types.parse(spec, f"env/defaults.env: {name}") if spec is not None else None)
            for name, default, doc, section, spec, declared, brief in DECLARED}


def parse_knobs(path: Path) -> dict[str, Knob]:
    """Parse a declarations file (read_knobs, and the generator that writes knobs.py)."""
    if log := os.environ.get("SHOPSIMRL_PARSE_LOG"):  # test-only: count the parses (tests/fakes/README.md)
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()} {path}\n")
    values, errors = read_env_file(path)
    if errors:
        raise ToolkitError("the knob declarations cannot be parsed", errors[0], "fix env/defaults.env")
    knobs: dict[str, Knob] = {}
    section, doc, spec, declared = "", [], None, ("", "")
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("## "):
            section, doc, spec = line[3:].strip(), [], None
        elif line.startswith("#:"):
            type_text, _, facts_text = line[2:].partition(";")
            spec, declared = _spec(type_text, f"{path}:{n}"), (facts_text, f"{path}:{n}")
        elif line.startswith("#"):
            doc.append(line.lstrip("#").strip())
        elif "=" in line and not line.startswith(" "):
            name = line.split("=", 1)[0].strip()
            knobs[name] = Knob(name, values.get(name) or "", doc=" ".join(doc), section=section, type=spec,
                               facts=_facts(name, *declared) if spec is not None else frozenset(), brief=_brief(doc))
            doc, spec, declared = [], None, ("", "")
        else:
            doc, spec = [], None
    return knobs


def _spec(text: str, where: str) -> KnobType:
    try:
        return types.parse(text, where)
    except types.SpecError as exc:
        raise ToolkitError(str(exc), where, "write the type as its module doc says (pyhelpers/config/types.py)") from None


def _facts(name: str, text: str, where: str) -> frozenset[str]:
    try:
        return facts.parse(text, name, where)
    except facts.FactError as exc:
        raise ToolkitError(str(exc), where, "write the facts as pyhelpers/config/facts.py says") from None


def _brief(doc: list[str]) -> str:
    """The doc's lines up to the first that ends a sentence (never cut mid-sentence)."""
    end = next((i for i, line in enumerate(doc) if line.endswith(_SENTENCE_ENDS)), len(doc) - 1)
    return " ".join(doc[:end + 1])


_KEY = re.compile(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=")


def read_env_file(path: Path) -> tuple[dict[str, str], tuple[str, ...]]:
    """(values, errors) of a dotenv file, parsed by python-dotenv's own parser. Each statement it
    cannot parse (an unterminated quote, a line without `=`) is an error `<file>:<line>: ...`;
    python-dotenv itself would drop the key with a warning that names neither file nor key. The
    error shows the key, never the value (it may be a secret)."""
    from dotenv.parser import parse_stream  # local: python-dotenv, read only when a .env exists

    values: dict[str, str] = {}
    errors: list[str] = []
    with path.open(encoding="utf-8") as f:
        for b in parse_stream(f):
            if b.error:
                key = _KEY.match(b.original.string)
                what = f"the value of {key.group(1)}" if key else "a line that is not NAME=value"
                errors.append(f"{path}:{b.original.line}: cannot parse {what} (an unterminated quote? "
                              "write NAME=value, NAME='value' or NAME=\"value\")")
            elif b.key is not None:
                values[b.key] = b.value or ""
    return values, tuple(errors)


def is_secret(name: str, extra: frozenset[str] = frozenset()) -> bool:
    """A knob declared secret, a name by the naming rule of architecture §3 (a knob so named must be
    declared secret: facts.py), or one listed in SECRET_VARS."""
    if name.endswith(facts.SECRET_SUFFIXES) or name in extra:
        return True
    knob = declarations(DEFAULTS_FILE)[1].get(name)
    return knob is not None and knob.has("secret")

