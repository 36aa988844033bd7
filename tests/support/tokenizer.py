"""A small HF model directory shaped like Qwen3.5-4B's, built offline inside a test.

    from support.tokenizer import build_tokenizer
    model_dir = build_tokenizer(tmp_path / "tok")
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)

What makes it Qwen3.5-shaped (the parts the toolkit and slime read; no weights):
- config.json `model_type: qwen3_5`: transformers 5.23 then loads the tokenizer as
  Qwen3_5Tokenizer (models/auto/tokenization_auto.py), whose pre-tokenizer (Qwen's split regex,
  digits one by one, then byte-level) and NFC normaliser replace whatever tokenizer.json says --
  so tokenizer.json is written with that same pipeline, and the fake SGLang (which reads
  tokenizer.json with `tokenizers` alone) tokenizes exactly as the plugin does;
- preprocessor_config.json: Qwen3.5 is an image-text-to-text model, transformers maps `qwen3_5`
  to Qwen3VLProcessor (models/auto/processing_auto.py), so slime's load_processor returns a
  processor and its Dataset insists on list prompts (slime 624b824, slime/utils/data.py:259-264).
  The stand-in slime (tests/fakes/slime_stub) treats this file as "the model has a processor";
- the chat template's thinking behaviour (CHAT_TEMPLATE below, written here from how Qwen3.5's
  template behaves, not copied): ChatML turns; the generation prompt opens a reasoning block,
  `<|im_start|>assistant\\n<think>\\n` (`<think>\\n\\n</think>\\n\\n` with enable_thinking=False);
  an assistant turn is re-rendered with its reasoning only when it comes after the last user
  message, earlier turns lose it; no user message is an error;
- special tokens <|im_start|>, <|im_end|> (eos), <|endoftext|> (pad); <think> and </think> are
  added, non-special tokens as in Qwen's vocabulary.
Byte-level BPE (any text, Chinese included, round-trips), trained in well under a second on a
tiny corpus. The directory also serves as `--model-path` for tests/fakes/fake_sglang.py. With
`processor=False` the preprocessor file is left out (a text-only model: slime gets no processor).
"""

from __future__ import annotations

import json
from pathlib import Path

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
THINK = ["<think>", "</think>"]
# Qwen's pre-tokenizer split (transformers' Qwen3_5Tokenizer.PRETOKENIZE_REGEX), so that the
# tokenizer.json the fake engine reads and the class transformers loads agree token for token.
SPLIT_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")

CHAT_TEMPLATE = (
    # the last user message: assistant turns after it keep their reasoning, earlier ones lose it
    "{%- set state = namespace(last_user=-1) %}"
    "{%- for m in messages %}{%- if m['role'] == 'user' %}{%- set state.last_user = loop.index0 %}{%- endif %}"
    "{%- endfor %}"
    "{%- if state.last_user < 0 %}{{- raise_exception('No user query found in messages.') }}{%- endif %}"
    "{%- for m in messages %}"
    "{%- set body = m['content'] | trim %}"
    "{%- if m['role'] == 'system' %}"
    "{%- if not loop.first %}{{- raise_exception('System message must be at the beginning.') }}{%- endif %}"
    "{{- '<|im_start|>system\\n' + body + '<|im_end|>\\n' }}"
    "{%- elif m['role'] == 'assistant' %}"
    "{%- set reasoning = '' %}"
    "{%- if '</think>' in body %}"
    "{%- set reasoning = body.split('</think>')[0].split('<think>')[-1] | trim %}"
    "{%- set body = body.split('</think>')[-1].lstrip('\\n') %}"
    "{%- endif %}"
    "{%- if loop.index0 > state.last_user %}"
    "{{- '<|im_start|>assistant\\n<think>\\n' + reasoning + '\\n</think>\\n\\n' + body + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>assistant\\n' + body + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- elif m['role'] == 'tool' %}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + body + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + m['role'] + '\\n' + body + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- else %}{{- '<think>\\n' }}{%- endif %}"
    "{%- endif %}"
)

CORPUS = [
    "Thought: 先搜索目标商品。\nAction: search[红色 连衣裙 夏季]",
    "Thought: 选择规格后购买。\nAction: click[buy now]",
    "<think>\n先想一想要买什么，再搜索。\n</think>\n\n",
    "Instruction: [SEP] 我想买一双白色的运动鞋，预算三百元以内 [SEP] Search",
    "搜索功能是否可用: True\n\n可点击的按钮: [\"back to search\", \"next >\", \"b0001\"]",
    "You are a shopping agent. Select an option before you click Buy Now.",
    "description features reviews attributes price rating page total results",
    "0123456789 ¥ [ ] { } ( ) : ; , . ! ? - _ / | 的 了 是 在 我 有 和 就 不 人 都 一 上 也 很 到 说 要 去",
]

# Qwen3.5-4B's config.json fields the toolkit and slime read: the model type (transformers picks the
# tokenizer and processor by it), the dtype (the disk plan), and the text_config fields slime's job
# compares with the model flags at its start (pyhelpers/doctor/hf_config.py), with the values of
# slime's scripts/models/qwen3.5-4B.sh (tests/fakes/slime_stub/scripts/models/qwen3.5-4B.sh). slime
# compares text_config alone: tie_word_embeddings is there too, not only at the top level.
CONFIG = {"model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"],
          "torch_dtype": "bfloat16", "vocab_size": 248320, "tie_word_embeddings": True,
          "text_config": {"model_type": "qwen3_5_text", "dtype": "bfloat16", "vocab_size": 248320,
                          "hidden_size": 2560, "intermediate_size": 9216, "num_hidden_layers": 32,
                          "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 256,
                          "rms_norm_eps": 1e-06, "tie_word_embeddings": True,
                          "rope_parameters": {"rope_type": "default", "rope_theta": 10000000,
                                              "partial_rotary_factor": 0.25}},
          "vision_config": {"model_type": "qwen3_5_vision"}}
PREPROCESSOR = {"image_processor_type": "Qwen2VLImageProcessorFast", "processor_class": "Qwen3VLProcessor",
                "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2}


def build_tokenizer(out_dir: Path, vocab_size: int = 600, *, processor: bool = True) -> Path:
    """Write a loadable Qwen3.5-shaped model directory (no weights) at out_dir and return it."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        trainers,
    )

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in THINK])
    tok.save(str(out_dir / "tokenizer.json"))
    config = {
        "tokenizer_class": "Qwen3_5Tokenizer",
        "model_max_length": 262144,
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
    (out_dir / "config.json").write_text(json.dumps(CONFIG, indent=1) + "\n", encoding="utf-8")
    if processor:
        (out_dir / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR, indent=1) + "\n",
                                                          encoding="utf-8")
    return out_dir
