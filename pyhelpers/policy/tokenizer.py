"""The policy's tokenizer in the shared prompt builder: the one loader that training rollouts (the
plugin, inside slime's Ray actor) and evaluation (bare val, the gate, `make plan`'s warm-up) use.

Where the path comes from differs (the plugin's YAML or --hf-checkpoint; a round's HF export or
--model-dir), so each caller checks that it has one and passes the fix to print when it cannot be
loaded; loading itself is the same: transformers' AutoTokenizer with the model's own code allowed
(Qwen3.5's tokenizer class comes with the model), wrapped in PromptBuilder.
"""

from __future__ import annotations

from typing import Any

from pyhelpers.errors import ToolkitError
from pyhelpers.policy.prompt_builder import PromptBuilder


def load_builder(path: str, *, fix: str) -> PromptBuilder:
    """The prompt builder on the tokenizer of the HF model directory `path`; a ToolkitError naming
    `path` and `fix` when it cannot be loaded."""
    from transformers import AutoTokenizer  # heavy: transformers (~2 s), only when a tokenizer is loaded

    try:
        tok = AutoTokenizer.from_pretrained(path, trust_remote_code=True)
    except (OSError, ValueError) as exc:
        raise ToolkitError(f"cannot load the policy tokenizer: {exc}", path, fix) from None
    return PromptBuilder(tok)


def pad_id(tokenizer: Any) -> int:
    """The id that pads an otherwise empty response: eos, else pad, else 0."""
    pad = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.pad_token_id
    return int(pad if pad is not None else 0)
