"""JSON files on disk: atomic writes, canonical bytes, and schema-validated loads.

Every artifact of a run is written through ``write_json_atomic`` (temp file in the same
directory, fsync, rename), so a crash leaves either the old file or the new one, never half of
one. ``load_validated`` reads a file and validates it against a schema in pyhelpers/schemas/;
its error names the file, the JSON path and the rule that failed. Only stdlib at import time:
the rollout plugin uses this module inside slime's environment.
"""

from __future__ import annotations

import json
import os
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from pyhelpers.errors import ToolkitError

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"


def canonical_bytes(obj: Any) -> bytes:
    """Deterministic JSON: sorted keys, fixed separators, UTF-8, trailing newline."""
    return (json.dumps(obj, sort_keys=True, ensure_ascii=False, indent=1, separators=(",", ": "))
            + "\n").encode("utf-8")


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write data to path via a temp file in the same directory, fsync, then rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_json_atomic(path: Path, obj: Any) -> None:
    write_bytes_atomic(path, canonical_bytes(obj))


def write_json_exclusive(path: Path, obj: Any) -> bool:
    """Create path atomically only if it does not exist yet ("first version wins").
    Returns False when the file was already there (its content is left untouched)."""
    path = Path(path)
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(canonical_bytes(obj))
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)  # fails if path exists: no race between two writers
        except FileExistsError:
            return False
        return True
    finally:
        os.unlink(tmp)


@cache
def schema(name: str) -> dict:
    """The JSON Schema pyhelpers/schemas/<name>.schema.json."""
    return json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))


@cache
def _registry():
    """Every schema in pyhelpers/schemas/, by its $id, so files can $ref each other."""
    from referencing import Registry, Resource  # heavy: jsonschema/referencing (~0.2 s), only when validating

    resources = []
    for f in sorted(SCHEMA_DIR.glob("*.schema.json")):
        doc = json.loads(f.read_text(encoding="utf-8"))
        resources.append((doc["$id"], Resource.from_contents(doc)))
    return Registry().with_resources(resources)


@cache
def _validator(name: str):
    import jsonschema  # heavy: as above

    cls = jsonschema.validators.validator_for(schema(name))
    return cls(schema(name), registry=_registry(), format_checker=cls.FORMAT_CHECKER)


def validation_errors(obj: Any, name: str) -> list[str]:
    """Every violation of schema `name`, as '<json path>: <message> (rule: <keyword>)'."""
    errs = sorted(_validator(name).iter_errors(obj), key=lambda e: list(e.absolute_path))
    return [f"{e.json_path}: {e.message} (rule: {e.validator})" for e in errs]


def validate(obj: Any, name: str, where: str) -> Any:
    errs = validation_errors(obj, name)
    if errs:
        more = f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
        raise ToolkitError(f"invalid {name}", f"{where} at {errs[0]}{more}",
                           f"fix the file or regenerate it; schema: pyhelpers/schemas/{name}.schema.json")
    return obj


def load_json_or_none(path: Path) -> Any:
    """The file's JSON, or None when it is missing or not (yet) valid JSON: for state a reader
    may see before its writer made it."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None


def load_json(path: Path) -> Any:
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ToolkitError("file not found", str(path), "check the path") from None
    except json.JSONDecodeError as exc:
        raise ToolkitError(f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})", str(path),
                           "fix or regenerate the file") from None


def load_validated(path: Path, name: str) -> Any:
    """Load a JSON file and validate it against schema `name`."""
    return validate(load_json(path), name, str(path))
