"""What a test session builds once and every xdist worker reads: the rehearsal world and the
uninterrupted reference rehearsal.

    info = once(tmp_path_factory, "reference", build)   # build(dir) -> a JSON-able dict

The first worker that asks builds under a lock; the others wait on the lock, then read the
result the builder wrote (result.json, written last and atomically: a builder that died leaves
none, and the next one builds again). A failed build is a result too (say, a rehearsal's exit
code and output): every consumer then fails with it instead of each rebuilding.

`untouched(roots)` guards what is shared: the fingerprint of every file under the roots (path,
size, mtime) before and after a test; a test that wrote there fails, naming the files.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def shared_root(tmp_path_factory) -> Path:
    """The session's base temp dir that every xdist worker of this session shares."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def _flock(path: Path) -> Iterator[None]:
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def once(tmp_path_factory, name: str, build: Callable[[Path], dict]) -> dict:
    root = shared_root(tmp_path_factory)
    where = root / name
    result = where / "result.json"
    with _flock(root / f"{name}.lock"):
        if result.is_file():
            return json.loads(result.read_text())
        where.mkdir(exist_ok=True)
        info = build(where)
        tmp = result.with_suffix(".tmp")
        tmp.write_text(json.dumps(info))
        tmp.rename(result)
        return info


def fingerprint(roots: list[Path]) -> dict[str, tuple[int, int]]:
    """{path: (size, mtime_ns)} of every file under the roots (symlinks as links)."""
    out: dict[str, tuple[int, int]] = {}
    stack = [Path(r) for r in roots if Path(r).exists()]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    stack.append(Path(e.path))
                else:
                    st = e.stat(follow_symlinks=False)
                    out[e.path] = (st.st_size, st.st_mtime_ns)
    return out


@contextmanager
def untouched(roots: list[Path], what: str) -> Iterator[None]:
    before = fingerprint(roots)
    yield
    after = fingerprint(roots)
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    assert not changed, (f"this test wrote into {what}, which other tests read at the same time "
                         f"(copy it first, as test_report does): {changed[:10]}")
