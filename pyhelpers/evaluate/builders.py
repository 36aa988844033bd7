"""The eval prompt builder on a model dir's tokenizer, loaded once per process for as long as the
tokenizer files stay the same (every export copies the base model's): the evaluate stage and the
baseline use it, and the train stage warms it while its job trains (the loop is otherwise idle
then), so the round transition does not wait for the tokenizer."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyhelpers.policy.prompt_builder import PromptBuilder

_loaded: dict[str, PromptBuilder] = {}  # the tokenizer files' hash -> the builder


def builder_for(model_dir: str) -> PromptBuilder:
    """The prompt builder on model_dir's tokenizer, cached by the tokenizer files' content."""
    # local: `make status`/`plan` import the stages, which import this; evaluate.val's httpx costs ~0.3 s
    from pyhelpers.evaluate import val

    d = Path(model_dir)
    key = hashlib.sha256(b"".join((d / f).read_bytes() for f in ("tokenizer.json", "tokenizer_config.json")
                                  if (d / f).is_file())).hexdigest()
    if key not in _loaded:
        _loaded[key] = val.load_builder(model_dir)
    return _loaded[key]
