"""Where the stand-ins read the pinned flag lists (slime/Megatron train.py, SGLang server): one place,
so moving the lists moves every reader. FAKE_SLIME_FLAGS_FILE / FAKE_SGLANG_FLAGS_FILE override."""

from __future__ import annotations

import os
from pathlib import Path

_LISTS = Path(__file__).resolve().parents[2] / "env" / "flags"  # the project's pinned lists (env/flags/README.md)


def slime_train_flags_file() -> Path:
    return Path(os.environ.get("FAKE_SLIME_FLAGS_FILE") or _LISTS / "slime_train_flags.txt")


def sglang_server_flags_file() -> Path:
    return Path(os.environ.get("FAKE_SGLANG_FLAGS_FILE") or _LISTS / "sglang_server_flags.txt")


def names(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.startswith("--")]
