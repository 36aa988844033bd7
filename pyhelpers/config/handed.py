"""What a start reads from the configuration files, and how it hands that on: the files are read
once per start. `config export` of a bin/ script puts their contents (JSON, each secret's value
left out) into HANDED_VAR, and every process that script starts resolves from there (load.py)
instead of reading them again (architecture §3).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pyhelpers.config.declarations import declarations, read_env_file
from pyhelpers.config.knobs import SOURCE_SHA256

# A start's configuration as read from its files (JSON, no secret value), handed to the processes
# of that start in their environment: bin/ scripts export what `config export` prints (load.start).
HANDED_VAR = "SHOPSIMRL_CONFIG"


@dataclass(frozen=True)
class Files:
    """What a resolution reads from the files: each value before the environment and ${NAME}
    expansion (env/defaults.env < .env) and where it came from; .env's names that are no knob and
    the statements it cannot parse; the declarations' digest."""

    declared: str
    env_file: Path
    layered: dict[str, str]
    sources: dict[str, str]
    undeclared: tuple[str, ...]
    env_errors: tuple[str, ...]


def env_file_path(root: Path, environ: Mapping[str, str]) -> Path:
    """The project's .env (SHOPSIMRL_ENV_FILE points elsewhere, for tests and rehearsals)."""
    return Path(environ.get("SHOPSIMRL_ENV_FILE") or root / ".env")


def read_files(root: Path, environ: Mapping[str, str], defaults_file: Path | None) -> Files:
    """The declarations (`defaults_file`, else the project's env/defaults.env) with .env over them."""
    declared, knobs = declarations(Path(defaults_file or root / "env" / "defaults.env"))
    env_file = env_file_path(root, environ)
    dotenv, env_errors = read_env_file(env_file) if env_file.is_file() else ({}, ())
    layered = {name: knob.default for name, knob in knobs.items()}
    sources = dict.fromkeys(layered, "env/defaults.env")
    for name, value in dotenv.items():
        layered[name], sources[name] = value, str(env_file)
    return Files(declared, env_file, layered, sources, tuple(sorted(set(dotenv) - set(knobs))), env_errors)


def hand_on(files: Files, root: Path, is_secret: Callable[[str], bool]) -> str:
    """The text of HANDED_VAR for `files`: a secret that .env holds is left out (a process that needs
    one reads it where it lives, .env or the environment)."""
    secrets = sorted(n for n, where in files.sources.items() if where == str(files.env_file) and is_secret(n))
    return json.dumps({
        "declared": files.declared, "root": str(root), "env_file": str(files.env_file),
        "layered": {n: "" if n in secrets else v for n, v in files.layered.items()}, "sources": files.sources,
        "secrets_in_env_file": secrets, "undeclared": files.undeclared, "env_errors": files.env_errors,
    }, separators=(",", ":"))


def received(environ: Mapping[str, str], root: Path) -> Files | None:
    """The files' contents handed in HANDED_VAR, when they are this process's: the same root, .env
    and declarations (those of knobs.py). A secret .env held is read from .env, unless the
    environment gives it anyway."""
    try:
        doc = json.loads(environ.get(HANDED_VAR) or "null")
    except ValueError:
        return None
    env_file = env_file_path(root, environ)
    if not isinstance(doc, dict) or (doc.get("declared"), doc.get("root"), doc.get("env_file")) != (
            SOURCE_SHA256, str(root), str(env_file)):
        return None
    layered = doc["layered"]
    if missing := [n for n in doc["secrets_in_env_file"] if n not in environ]:
        dotenv = read_env_file(env_file)[0] if env_file.is_file() else {}
        layered.update({n: dotenv.get(n, "") for n in missing})
    return Files(doc["declared"], env_file, layered, doc["sources"], tuple(doc["undeclared"]),
                 tuple(doc["env_errors"]))
