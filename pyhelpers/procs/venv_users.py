"""Which processes run from a virtualenv: `make setup` must not reinstall packages under them.

    python3 pyhelpers/procs/venv_users.py ROOT/.venv     # one "PID COMMAND" line per user

A process runs from the venv when its program (argv[0], taken relative to the process's working
directory) lives in the venv's bin/: the driver loop, the analyst, Ray's workers, slime's job all
start as .venv/bin/python. Run by path with any Python 3.10+, stdlib only: bin/setup calls it
before it touches the venv, which may be the very thing it repairs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def users(venv: Path) -> list[tuple[int, str]]:
    bin_dir = os.path.realpath(Path(venv) / "bin")
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = [os.fsdecode(a) for a in (entry / "cmdline").read_bytes().split(b"\0") if a]
            cwd = os.readlink(entry / "cwd")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if not argv or "/" not in argv[0]:
            continue  # a program found on PATH is not one of the venv's scripts
        program = os.path.abspath(os.path.join(cwd, argv[0]))  # not resolved: bin/python is a symlink
        if os.path.realpath(os.path.dirname(program)) == bin_dir:
            found.append((int(entry.name), " ".join(argv)[:200]))
    return sorted(found)


if __name__ == "__main__":
    for pid, command in users(Path(sys.argv[1])):
        print(pid, command)
