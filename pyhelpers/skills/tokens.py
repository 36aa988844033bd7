"""Token counters for skill lines: the policy tokenizer from an HF model dir, or the estimate.

A counter is a (name, count) pair; the name is stored in the bank next to every count, so a
later compile with a different tokenizer recounts everything. The HF counter's name is derived
from the tokenizer file's content, not the directory name, so successive exports (hf-<iter>)
of the same model keep their counts.

Loading: ``tokenizers.Tokenizer.from_file(<dir>/tokenizer.json)`` (fast, no network); when a
directory has no tokenizer.json, ``transformers.AutoTokenizer.from_pretrained(dir,
local_files_only=True)``. Both are imported lazily (only the CLI path needs them).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from pyhelpers.errors import ToolkitError
from pyhelpers.skills.text import ESTIMATE_NAME, estimate_tokens

Counter = tuple[str, Callable[[str], int]]


def estimate_counter() -> Counter:
    return ESTIMATE_NAME, estimate_tokens


def hf_counter(hf_dir: Path) -> Counter:
    """The policy tokenizer of `hf_dir` (counts without special tokens)."""
    hf_dir = Path(hf_dir)
    if not hf_dir.is_dir():
        raise ToolkitError("HF model directory not found", str(hf_dir),
                           "pass --hf-dir the exported model (with tokenizer.json) or leave it out to estimate")
    tok_file = hf_dir / "tokenizer.json"
    if tok_file.is_file():
        from tokenizers import (
            Tokenizer,  # heavy: tokenizers, only when counting tokens with the model's tokenizer
        )

        try:
            tok = Tokenizer.from_file(str(tok_file))
        except Exception as exc:  # tokenizers raises a bare Exception on a bad file
            raise ToolkitError(f"cannot load tokenizer ({exc})", str(tok_file),
                               "re-export the model or fix tokenizer.json") from None
        digest = hashlib.sha256(tok_file.read_bytes()).hexdigest()[:16]
        return f"hf-tokenizer:{digest}", lambda s: len(tok.encode(s, add_special_tokens=False).ids)
    try:
        from transformers import AutoTokenizer  # heavy: transformers (~2 s), only when a tokenizer is loaded

        auto = AutoTokenizer.from_pretrained(str(hf_dir), local_files_only=True)
    except Exception as exc:  # transformers raises many types (OSError, ValueError, ...)
        raise ToolkitError(f"cannot load a tokenizer ({type(exc).__name__})", str(hf_dir),
                           "the directory needs tokenizer.json or the tokenizer files of an HF model") from None
    files = sorted(p for p in hf_dir.iterdir() if p.is_file() and "token" in p.name.lower())
    digest = hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in files)).hexdigest()[:16]
    return f"hf-auto:{digest}", lambda s: len(auto.encode(s, add_special_tokens=False))


def counter_for(hf_dir: Path | None) -> Counter:
    """hf_counter(hf_dir) when a directory is given, else the estimate."""
    return hf_counter(hf_dir) if hf_dir else estimate_counter()
