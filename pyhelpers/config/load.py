"""Resolved configuration: env/defaults.env < the project's .env < the process environment.

One parser (python-dotenv) reads both files; ``${NAME}`` references are expanded after the
precedence is applied, so an override of MODELS_DIR in .env moves HF_MODEL with it. The result
is a plain value object that the rest of the code receives; nothing deeper reads os.environ. The
files are read once per start: `config export` hands what they hold to every process the start
runs (HANDED_VAR, start below), and a process handed them resolves from that, never a secret in it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pyhelpers.config import facts
from pyhelpers.config import knobs as generated
from pyhelpers.config import types as knob_types
from pyhelpers.config.knobs import Knobs
from pyhelpers.config.types import KnobType
from pyhelpers.errors import ToolkitError
from pyhelpers.run.layout import wandb_dir

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULTS_FILE = PROJECT_ROOT / "env" / "defaults.env"
SECRET_SUFFIXES = facts.SECRET_SUFFIXES
_REF = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)\}")
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
    return dict(_declarations(Path(path))[1])


def _declarations(path: Path) -> tuple[str, dict[str, Knob]]:
    """(the file's digest, its knobs), once per process and version of the file."""
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _PARSED:
        sha = digest(path)
        _PARSED[key] = (sha, generated_knobs() if sha == generated.SOURCE_SHA256 else parse_knobs(path))
    return _PARSED[key]


def digest(path: Path) -> str:
    """sha256 of a declarations file: which file knobs.py was generated from."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def generated_knobs() -> dict[str, Knob]:
    """The declarations knobs.py holds (those of env/defaults.env when it was generated)."""
    return {name: Knob(name, default, doc=doc, section=section, brief=brief, facts=frozenset(declared),
                       type=knob_types.parse(spec, f"env/defaults.env: {name}") if spec is not None else None)
            for name, default, doc, section, spec, declared, brief in generated.DECLARED}


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
        return knob_types.parse(text, where)
    except knob_types.SpecError as exc:
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
    if name.endswith(SECRET_SUFFIXES) or name in extra:
        return True
    knob = _declarations(DEFAULTS_FILE)[1].get(name)
    return knob is not None and knob.has("secret")


@dataclass(frozen=True)
class Config(Knobs):
    """Resolved knob values, where each came from, and the project root. Code outside config/
    reads a knob as a typed attribute (cfg.ROUNDS: int; the attributes are generated from
    env/defaults.env into knobs.py); the string accessors below are config/'s own."""

    values: dict[str, str]
    sources: dict[str, str]
    root: Path
    env_file: Path
    undeclared: tuple[str, ...] = field(default=())
    make_vars: tuple[str, ...] = field(default=())  # names given as `make NAME=value` (from MAKEFLAGS)
    env_errors: tuple[str, ...] = field(default=())  # `.env:LINE: ...` for statements it cannot parse

    def __getitem__(self, name: str) -> str:
        return self.values[name]

    def get(self, name: str, default: str = "") -> str:
        return self.values.get(name, default)

    def int(self, name: str) -> int:
        raw = self.values[name]
        try:
            return int(raw)
        except ValueError:
            raise ToolkitError(
                f"{name}={raw!r} is not a whole number", self.sources.get(name, name),
                f"set {name} to an integer, e.g. {name}={read_knobs().get(name, Knob(name, '1', doc='', section='')).default}",
            ) from None

    def float(self, name: str) -> float:
        raw = self.values[name]
        try:
            return float(raw)
        except ValueError:
            raise ToolkitError(f"{name}={raw!r} is not a number", self.sources.get(name, name),
                               f"set {name} to a number such as 0.5") from None

    def flag(self, name: str) -> bool:
        return self.values.get(name, "0").strip() == "1"

    def path(self, name: str) -> Path:
        """A path knob; relative paths are relative to the project root."""
        p = Path(os.path.expanduser(self.values[name]))
        return p if p.is_absolute() else self.root / p

    # The converters behind the typed attributes of Knobs (each runs once per knob and Config).
    def _raw(self, name: str) -> str:
        return self.values[name]

    def _int(self, name: str) -> int:
        return self.int(name)

    def _float(self, name: str) -> float:
        return self.float(name)

    def _flag(self, name: str) -> bool:
        return self.flag(name)

    def _path(self, name: str) -> Path:
        return self.path(name)

    def _path_or_none(self, name: str) -> Path | None:
        return self.path(name) if self.values[name] else None

    def is_secret(self, name: str) -> bool:
        """name is a secret: by the naming rule, or listed in this configuration's SECRET_VARS."""
        extra = frozenset(s.strip() for s in self.values.get("SECRET_VARS", "").split(",") if s.strip())
        return is_secret(name, extra)

    @property
    def secret_names(self) -> frozenset[str]:
        return frozenset(n for n in self.values if self.is_secret(n))

    def public(self) -> dict[str, str]:
        """Values with every secret replaced by '***' (or '' when unset): safe to print or save."""
        secrets = self.secret_names
        return {k: ("***" if v else "") if k in secrets else v for k, v in self.values.items()}

    # Derived values: computed once here so bash and Python never disagree.
    @property
    def run_name(self) -> str:
        return self.values.get("RUN_NAME") or self.values["WANDB_GROUP"]

    @property
    def run_dir(self) -> Path:
        return self.path("RUNS_DIR") / self.run_name

    @property
    def save_dir(self) -> Path:
        return self.path("TRAIN_SAVE") / self.run_name

    @property
    def ray_temp_dir(self) -> str:
        if self.values.get("RAY_TEMP_DIR"):
            return self.values["RAY_TEMP_DIR"]
        digest = hashlib.sha256(str(self.run_dir).encode()).hexdigest()[:8]
        return f"/tmp/ray-{digest}"

    @property
    def cuda_visible_devices(self) -> str:
        return ",".join(str(i) for i in range(max(self.int("NUM_GPUS"), 0)))

    def process_env(self, secrets: bool = False) -> dict[str, str]:
        """The environment every process of the run gets: each value and the derived ones, no
        secret unless asked (a secret reaches only the process that uses it:
        pyhelpers/launch/secret_env.py). Set by the process that parsed the configuration (`run
        loop`) for what it starts -- outside programs (conda through bin/in-env, W&B, the
        simulator's launcher) read some knobs from the environment."""
        values = self.values if secrets else {k: v for k, v in self.values.items() if not self.is_secret(k)}
        return {**values, **self.derived()}

    def derived(self) -> dict[str, str]:
        return {
            "PROJECT_ROOT": str(self.root),
            "RUN_NAME": self.run_name,
            "RUN_DIR": str(self.run_dir),
            "SAVE_DIR": str(self.save_dir),
            "RAY_TEMP_DIR": self.ray_temp_dir,
            "CUDA_VISIBLE_DEVICES": self.cuda_visible_devices,
            "WANDB_DIR": str(wandb_dir(self.run_dir)),
            # wandb stages files in ~/.local/share and ~/.cache by default: on AutoDL that is the
            # small system disk (M2), so every process of the run keeps them under the run.
            "WANDB_DATA_DIR": str(wandb_dir(self.run_dir) / "data"),
            "WANDB_CACHE_DIR": str(wandb_dir(self.run_dir) / "cache"),
        }


def _expand(values: dict[str, str]) -> dict[str, str]:
    """Expand ${NAME} from other knobs (then the environment), repeatedly, catching cycles."""
    out = dict(values)
    for _ in range(10):
        changed = False
        for k, v in out.items():
            new = _REF.sub(lambda m: out.get(m.group(1), os.environ.get(m.group(1), "")), v)
            if new != v:
                out[k], changed = new, True
        if not changed:
            return out
    loops = sorted(k for k, v in out.items() if _REF.search(v))
    raise ToolkitError("knob references form a cycle", ", ".join(loops), "remove the ${...} loop")


def make_command_line_names(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The NAME of each `make NAME=value` on the command line: make passes them to its recipes in
    MAKEFLAGS, after ` -- `, separated by unescaped spaces (an escaped one is `\\ `)."""
    flags = environ.get("MAKEFLAGS", "")
    if " -- " not in f" {flags} ":
        return ()
    assignments = re.split(r"(?<!\\) ", f" {flags} ".split(" -- ", 1)[1])
    return tuple(a.split("=", 1)[0] for a in assignments if re.match(r"[A-Za-z_][A-Za-z0-9_]*=", a))


def env_file_path(root: Path, environ: Mapping[str, str]) -> Path:
    """The project's .env (SHOPSIMRL_ENV_FILE points elsewhere, for tests and rehearsals)."""
    return Path(environ.get("SHOPSIMRL_ENV_FILE") or root / ".env")


# A start's configuration as read from its files (JSON, no secret value), handed to the processes
# of that start in their environment: bin/ scripts export what `config export` prints (start below).
HANDED_VAR = "SHOPSIMRL_CONFIG"


@dataclass(frozen=True)
class _Files:
    """What a resolution reads from the files: each value before the environment and ${NAME}
    expansion (env/defaults.env < .env) and where it came from; .env's names that are no knob and
    the statements it cannot parse; the declarations' digest."""

    declared: str
    env_file: Path
    layered: dict[str, str]
    sources: dict[str, str]
    undeclared: tuple[str, ...]
    env_errors: tuple[str, ...]


def _read(root: Path, environ: Mapping[str, str], defaults_file: Path | None) -> _Files:
    declared, knobs = _declarations(Path(defaults_file or root / "env" / "defaults.env"))
    env_file = env_file_path(root, environ)
    dotenv, env_errors = read_env_file(env_file) if env_file.is_file() else ({}, ())
    layered = {name: knob.default for name, knob in knobs.items()}
    sources = dict.fromkeys(layered, "env/defaults.env")
    for name, value in dotenv.items():
        layered[name], sources[name] = value, str(env_file)
    return _Files(declared, env_file, layered, sources, tuple(sorted(set(dotenv) - set(knobs))), env_errors)


def _resolve(files: _Files, root: Path, environ: Mapping[str, str]) -> Config:
    """The environment over the files, then ${NAME} expansion. Every .env entry is kept (it may hold
    extra secrets or proxies); the environment gives only the values of names the files have."""
    values, sources = dict(files.layered), dict(files.sources)
    for name in values:
        if name in environ:
            values[name], sources[name] = environ[name], "environment"
    return Config(_expand(values), sources, root=root, env_file=files.env_file, undeclared=files.undeclared,
                  env_errors=files.env_errors, make_vars=make_command_line_names(environ))


def load(environ: Mapping[str, str] | None = None, root: Path = PROJECT_ROOT,
         defaults_file: Path | None = None) -> Config:
    """Resolve the configuration: env/defaults.env < .env < `environ`. The files are read once per
    start: a process handed what they held (HANDED_VAR: `config export` of a bin/ script) takes it
    from there, and applies its own environment to it as a reading of the files would."""
    environ = os.environ if environ is None else environ
    files = _handed(environ, root) if defaults_file is None else None
    cfg = _resolve(files or _read(root, environ, defaults_file), root, environ)
    _note(cfg, "handed" if files else "resolved")
    return cfg


def start(environ: Mapping[str, str] | None = None, root: Path = PROJECT_ROOT) -> tuple[Config, str]:
    """A start's configuration (load), and the text of HANDED_VAR for the processes it starts: what
    the files held, each secret left out (a process that needs one reads it where it lives, .env or
    the environment). A text handed to this process is handed on as it is."""
    environ = os.environ if environ is None else environ
    if (files := _handed(environ, root)) is not None:
        cfg = _resolve(files, root, environ)
        _note(cfg, "handed")
        return cfg, environ[HANDED_VAR]
    files = _read(root, environ, None)
    cfg = _resolve(files, root, environ)
    _note(cfg, "resolved")
    secrets = sorted(n for n, where in files.sources.items() if where == str(files.env_file) and cfg.is_secret(n))
    return cfg, json.dumps({
        "declared": files.declared, "root": str(root), "env_file": str(files.env_file),
        "layered": {n: "" if n in secrets else v for n, v in files.layered.items()}, "sources": files.sources,
        "secrets_in_env_file": secrets, "undeclared": files.undeclared, "env_errors": files.env_errors,
    }, separators=(",", ":"))


def _handed(environ: Mapping[str, str], root: Path) -> _Files | None:
    """The files' contents handed in HANDED_VAR, when they are this process's: the same root, .env
    and declarations (those of knobs.py). A secret .env held is read from .env, unless the
    environment gives it anyway."""
    try:
        doc = json.loads(environ.get(HANDED_VAR) or "null")
    except ValueError:
        return None
    env_file = env_file_path(root, environ)
    if not isinstance(doc, dict) or (doc.get("declared"), doc.get("root"), doc.get("env_file")) != (
            generated.SOURCE_SHA256, str(root), str(env_file)):
        return None
    layered = doc["layered"]
    if missing := [n for n in doc["secrets_in_env_file"] if n not in environ]:
        dotenv = read_env_file(env_file)[0] if env_file.is_file() else {}
        layered.update({n: dotenv.get(n, "") for n in missing})
    return _Files(doc["declared"], env_file, layered, doc["sources"], tuple(doc["undeclared"]),
                  tuple(doc["env_errors"]))


def _note(cfg: Config, how: str) -> None:
    """Test-only (tests/fakes/README.md): with SHOPSIMRL_RESOLVE_LOG=FILE, one line per configuration
    a process resolved or was handed: `<pid> <digest of its public values> <how> <command>`, so a
    test counts the resolutions of one start. No value is written, so no secret."""
    if log := os.environ.get("SHOPSIMRL_RESOLVE_LOG"):
        digest = hashlib.sha256(json.dumps(cfg.public(), sort_keys=True).encode()).hexdigest()[:12]
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()} {digest} {how} {' '.join([Path(sys.argv[0]).name, *sys.argv[1:3]])}\n")
