"""Resolved configuration: env/defaults.env < the project's .env < the process environment.

One parser (python-dotenv) reads both files (declarations.py); ``${NAME}`` references are expanded
after the precedence is applied, so an override of MODELS_DIR in .env moves HF_MODEL with it. The
result is a plain value object that the rest of the code receives; nothing deeper reads os.environ.
The files are read once per start: `config export` hands what they hold to every process the start
runs (handed.py, start below), and a process handed them resolves from that, never a secret in it.
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

from pyhelpers.config import handed
from pyhelpers.config.declarations import PROJECT_ROOT, Knob, is_secret, read_knobs
from pyhelpers.config.knobs import Knobs
from pyhelpers.errors import ToolkitError
from pyhelpers.run.layout import wandb_dir

_REF = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)\}")


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
    def multinode(self) -> bool:
        """A run across machines (NNODES > 1; docs/multinode.md): asked here only (tests/test_house_rules.py)."""
        return self.NNODES > 1

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


def _resolve(files: handed.Files, root: Path, environ: Mapping[str, str]) -> Config:
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
    start: a process handed what they held (handed.py: `config export` of a bin/ script) takes it
    from there, and applies its own environment to it as a reading of the files would."""
    environ = os.environ if environ is None else environ
    files = handed.received(environ, root) if defaults_file is None else None
    cfg = _resolve(files or handed.read_files(root, environ, defaults_file), root, environ)
    _note(cfg, "handed" if files else "resolved")
    return cfg


def start(environ: Mapping[str, str] | None = None, root: Path = PROJECT_ROOT) -> tuple[Config, str]:
    """A start's configuration (load), and the text of HANDED_VAR for the processes it starts: what
    the files held, each secret left out (a process that needs one reads it where it lives, .env or
    the environment). A text handed to this process is handed on as it is."""
    environ = os.environ if environ is None else environ
    if (files := handed.received(environ, root)) is not None:
        cfg = _resolve(files, root, environ)
        _note(cfg, "handed")
        return cfg, environ[handed.HANDED_VAR]
    files = handed.read_files(root, environ, None)
    cfg = _resolve(files, root, environ)
    _note(cfg, "resolved")
    return cfg, handed.hand_on(files, root, cfg.is_secret)


def _note(cfg: Config, how: str) -> None:
    """Test-only (tests/fakes/README.md): with SHOPSIMRL_RESOLVE_LOG=FILE, one line per configuration
    a process resolved or was handed: `<pid> <digest of its public values> <how> <command>`, so a
    test counts the resolutions of one start. No value is written, so no secret."""
    if log := os.environ.get("SHOPSIMRL_RESOLVE_LOG"):
        digest = hashlib.sha256(json.dumps(cfg.public(), sort_keys=True).encode()).hexdigest()[:12]
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()} {digest} {how} {' '.join([Path(sys.argv[0]).name, *sys.argv[1:3]])}\n")
