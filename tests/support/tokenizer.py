"""A small HF tokenizer with a Qwen-style chat template, built offline inside a test.

    from support.tokenizer import build_tokenizer
    model_dir = build_tokenizer(tmp_path / "tok")       # tokenizer.json + tokenizer_config.json
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)

Byte-level BPE (any text, Chinese included, round-trips), trained in well under a second on a
tiny corpus, with the special tokens <|im_start|>, <|im_end|>, <|endoftext|>. The chat template is
Qwen2.5's ChatML layout (system / user / assistant / tool turns, generation prompt), so a prompt
builder that works here meets the same turn structure as the real model's. Model weights are not
needed: tokenizers/transformers load this directory with no network. The directory also serves as
`--model-path` for tests/fakes/fake_sglang.py.
"""

from __future__ import annotations

import json
from pathlib import Path

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if loop.first and message['role'] != 'system' %}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- if message['role'] == 'tool' %}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + message['content'] + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

CORPUS = [
    "Thought: 先搜索目标商品。\nAction: search[红色 连衣裙 夏季]",
    "Thought: 选择规格后购买。\nAction: click[buy now]",
    "Instruction: [SEP] 我想买一双白色的运动鞋，预算三百元以内 [SEP] Search",
    "搜索功能是否可用: True\n\n可点击的按钮: [\"back to search\", \"next >\", \"b0001\"]",
    "You are a shopping agent. Select an option before you click Buy Now.",
    "description features reviews attributes price rating page total results",
    "0123456789 ¥ [ ] { } ( ) : ; , . ! ? - _ / | 的 了 是 在 我 有 和 就 不 人 都 一 上 也 很 到 说 要 去",
]


def build_tokenizer(out_dir: Path, vocab_size: int = 600) -> Path:
    """Write a loadable tokenizer directory at out_dir and return it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    tok.save(str(out_dir / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 32768,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    (out_dir / "special_tokens_map.json").write_text(
        json.dumps({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}), encoding="utf-8")
    return out_dir
