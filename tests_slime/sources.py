#!/usr/bin/env python3
"""The slime lane's upstream sources: SLIME_DIR and MEGATRON_DIR at the pinned commits, and the
Megatron tree the lane puts on PYTHONPATH (slime's Megatron patch applied to a copy when the
checkout lacks it). Stdlib only: it runs before the lane's venv exists.

    python3 tests_slime/sources.py SLIME_DIR MEGATRON_DIR CACHE_DIR
prints MEGATRON_PATH on stdout; on a wrong or missing tree exits 1 with one line naming the fix.

A commit is read from git (`git -C DIR rev-parse HEAD`), or from a top-level COMMIT file (an
archive such as `git archive` output has no .git). The patch: slime's
docker/patch/v0.5.15.post1/megatron.patch, which slime's Dockerfile applies to its Megatron
checkout (docker/Dockerfile:118-133 at 624b824).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

SLIME_COMMIT = "624b824a898ab0ec1fcb4d373004c7f3852bf515"  # env/flags/slime_train_flags.txt names them too
MEGATRON_COMMIT = "1dcf0dafa884ad52ffb243625717a3471643e087"
PATCH = "docker/patch/v0.5.15.post1/megatron.patch"


def fail(msg: str) -> None:
    print(f"shopsimrl: {msg}", file=sys.stderr)
    sys.exit(1)


def commit_of(tree: Path) -> str | None:
    if (tree / ".git").exists():
        out = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True)
        return out.stdout.strip() or None
    stamp = tree / "COMMIT"
    return stamp.read_text().strip() if stamp.is_file() else None


def git_apply(tree: Path, patch: Path, *extra: str) -> bool:
    return subprocess.run(["git", "apply", *extra, str(patch)], cwd=tree, capture_output=True).returncode == 0


def main(slime: str, megatron: str, cache: str) -> int:
    want = f"slime {SLIME_COMMIT[:7]} and Megatron-LM {MEGATRON_COMMIT[:8]}"
    for knob, tree, pin in (("SLIME_DIR", Path(slime), SLIME_COMMIT), ("MEGATRON_DIR", Path(megatron), MEGATRON_COMMIT)):
        if not tree.is_dir():
            fail(f"{knob}={tree} is not a directory: the slime lane needs checkouts of {want}")
        got = commit_of(tree)
        if got != pin:
            fail(f"{knob}={tree} is at {got or 'an unknown commit (no .git, no COMMIT file)'}; the slime lane "
                 f"needs {want} ({SLIME_COMMIT}, {MEGATRON_COMMIT})")
    patch = Path(slime) / PATCH
    if not patch.is_file():
        fail(f"SLIME_DIR={slime} lacks {PATCH}")
    if git_apply(Path(megatron), patch, "--check", "--reverse"):
        print(megatron)  # the checkout already carries slime's patch
        return 0
    copy = Path(cache) / f"Megatron-LM-{MEGATRON_COMMIT[:8]}-patched"
    if not (copy / ".patched").is_file():
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(megatron, copy, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        if not git_apply(copy, patch):
            fail(f"slime's {PATCH} does not apply to MEGATRON_DIR={megatron} (a modified checkout?)")
        (copy / ".patched").write_text(f"{patch}\n")
    print(copy)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
