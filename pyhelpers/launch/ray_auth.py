"""The run's Ray token: Ray 2.60's token authentication (RAY_AUTH_MODE=token) for every listener
of the run's cluster -- GCS, client server, dashboard and job API refuse a caller without it.

One token per run, made on the head's first start and kept for the run's life (a resumed run's
head takes the same one), in runs/<RUN>/ray/auth-token: directory 0700, file 0600, written whole
before it is visible. It is handled like the other secrets: never on a command line, in a log or
in run.json. The head finds it through RAY_AUTH_TOKEN_PATH, a path, not the token (Ray's loader
logs the path only); the slime job inherits that environment from the raylet. Our own HTTP calls
send it as `Authorization: Bearer`. RAY_AUTH_TOKEN is taken out of the head's environment: Ray
reads it before RAY_AUTH_TOKEN_PATH, so a token of the user's shell would silently replace ours.
Source: ray 2.60.0 _private/authentication/ (http_token_authentication.py:29-80,
grpc_authentication_server_interceptor.py), the loader's order in _raylet.so's messages.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from pyhelpers.errors import ToolkitError
from pyhelpers.run import layout

OVERRIDING = ("RAY_AUTH_TOKEN",)  # dropped from the head's environment (see above)


def ensure_token(run_dir: Path) -> Path:
    """The run's token file, made now if it is missing. Never rewritten: a live head holds it."""
    return ensure_token_file(layout.ray_token(run_dir))


def ensure_token_file(path: Path) -> Path:
    """A random token in `path` (directory 0700, file 0600, written whole before it is visible),
    made now if it is missing; an existing one is kept (Ray's and the gate's: a live service holds it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    if path.is_file() and path.stat().st_size:
        path.chmod(0o600)
        return path
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, secrets.token_hex(32).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return path


def head_env(run_dir: Path) -> dict[str, str]:
    """What the head needs in its environment to require the token (made by ensure_token)."""
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(layout.ray_token(run_dir))}


def headers(run_dir: Path) -> dict[str, str]:
    """The header our HTTP calls to the dashboard / job API carry; none when the run has no token
    (a head started before tokens: it asks for none)."""
    try:
        token = layout.ray_token(run_dir).read_text().strip()
    except OSError:
        return {}
    return {"Authorization": f"Bearer {token}"} if token else {}


def refused(status: int, where: str) -> ToolkitError:
    """The error for a 401/403 from the head: it wants another token than the run's."""
    return ToolkitError(f"the Ray head refused the run's token (HTTP {status})", where,
                        "that head was not started by this run (or its token file was replaced): "
                        "`make stop`, then `make resume` starts the run's own head")
