"""Prompt builder: rendered once, tokens/mask/log-probs aligned, reasoning kept (never re-rendered), budget."""

from __future__ import annotations

import json

import pytest
from support.tokenizer import build_tokenizer

from pyhelpers.policy import prompt_builder
from pyhelpers.policy.prompt_builder import ContextBudgetError, PromptBuilder, TemplateError
from pyhelpers.policy.system_prompt import SYSTEM_PROMPT


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    import transformers

    return transformers.AutoTokenizer.from_pretrained(build_tokenizer(tmp_path_factory.mktemp("tok")))


def _respond(tok, text, eos=True):
    ids = tok.encode(text, add_special_tokens=False) + ([tok.convert_tokens_to_ids("<|im_end|>")] if eos else [])
    return ids, [-0.01 * (i + 1) for i in range(len(ids))]


def test_turns_stay_aligned_and_keep_every_turns_reasoning(tok):
    """Qwen3.5's generation prompt opens <think>; each response is reasoning + </think> + answer.
    The stream is appended, never re-rendered: earlier turns keep their reasoning, which the
    template's own re-render would drop (docs/training.md, "Thinking")."""
    b = PromptBuilder(tok)
    tr = b.start({"instruction": "我想买一双白色运动鞋"}, skills_block="## 技能\n[S-a1] 先选规格再购买")
    assert tr.prompt_text.startswith("<|im_start|>system\n" + SYSTEM_PROMPT) and "[S-a1]" in tr.prompt_text
    assert tr.prompt_text.endswith("<|im_start|>assistant\n<think>\n") and tr.response_length == 0
    turns = [("先搜索。\n</think>\n\nThought: 搜\nAction: search[白色 运动鞋]", True,
              "Instruction: [SEP] 页面一\n\n可点击的按钮: [\"b1\"]"),
             ("看页面。\n</think>\n\nThought: 点\nAction: click[b1]", False, "页面二 ¥199"),  # cut: no eos
             ("规格好了。\n</think>\n\nThought: 买\nAction: click[buy now]", True, None)]
    all_lp = []
    for text, eos, obs in turns:
        ids, lps = _respond(tok, text, eos)
        b.add_response(tr, ids, lps, text)
        all_lp += lps
        if obs:
            before = len(tr.token_ids)
            n = b.add_observation(tr, obs)
            assert n == len(tr.token_ids) - before
            assert tr.segments[-1].text.endswith("<|im_start|>assistant\n<think>\n")
    assert len(tr.token_ids) == len(tr.loss_mask) == len(tr.logprobs)
    assert len(tr.response_ids) == len(tr.response_mask) == len(tr.response_logprobs) == tr.response_length
    assert tr.loss_mask[:tr.prompt_len] == [0] * tr.prompt_len and tr.turns == 3
    # Mask 1 exactly on the policy's tokens, with their log-probs in order.
    assert [lp for lp, m in zip(tr.logprobs, tr.loss_mask, strict=True) if m] == all_lp
    # The stream is its own text, tokenized (the model emitted <|im_end|> itself on turns 1 and 3;
    # on turn 2 it was appended, mask 0), and every turn's reasoning is still in it.
    stream = tok.decode(tr.token_ids, skip_special_tokens=False)
    assert tok.encode(stream, add_special_tokens=False) == tr.token_ids
    assert all(text.split("</think>")[0] in stream for text, _, _ in turns)
    eos_id = tok.convert_tokens_to_ids("<|im_end|>")
    i2 = [s for s in tr.segments if s.kind == "observation"][1]
    assert tr.token_ids[i2.start] == eos_id and tr.loss_mask[i2.start] == 0
    # The template's own render drops the reasoning of turns before the last user message.
    full = tok.apply_chat_template([dict(m) for m in tr.messages], tokenize=False, add_generation_prompt=False)
    assert "先搜索。" not in full and "看页面。" not in full and "规格好了。" in full
    assert prompt_builder.extract_action(turns[1][0]).arg == "b1"


def test_budget(tok):
    b = PromptBuilder(tok)
    tr = b.start(instruction="买杯子")
    with pytest.raises(ContextBudgetError):
        b.start(instruction="买杯子", max_context_len=tr.prompt_len)
    # SGLang 0.5.15.post1 generates at most context - 2 - prompt tokens (scheduler.py:1905-1916)
    assert b.max_new_tokens(tr, tr.prompt_len + 100, 4096) == 98
    assert b.max_new_tokens(tr, tr.prompt_len + 100, 40) == 40
    assert b.max_new_tokens(tr, tr.prompt_len, 40) == 0
    ids, lps = _respond(tok, "Thought: x\nAction: search[杯子]")
    b.add_response(tr, ids, lps)
    used = len(tr.token_ids)
    with pytest.raises(ContextBudgetError):
        b.add_observation(tr, "很长的页面 " * 50, max_context_len=used + 10)
    assert len(tr.token_ids) == used  # refused without changing the transcript
    b.add_observation(tr, "短页面", max_context_len=used + 1000)


def test_budget_keeps_the_margins_sglang_enforces(tok):
    """SGLang 0.5.15.post1 accepts prompt + max_new_tokens == context length at the tokenizer
    manager (tokenizer_manager.py:973-997), but its scheduler aborts a prompt of context - 6 tokens
    or more (tp_worker.py:455-465, managers/utils.py:177) and generates at most context - 2 - prompt
    tokens (scheduler.py:1905-1916). The budget must ask for no more than that."""
    b = PromptBuilder(tok)
    tr = b.start(instruction="买杯子")
    n = tr.prompt_len
    assert b.max_new_tokens(tr, n + 50, 4096) == 48
    assert b.max_new_tokens(tr, n + 7, 4096) == 5       # the last prompt length SGLang accepts
    assert b.max_new_tokens(tr, n + 6, 4096) == 0       # SGLang would abort this prompt
    with pytest.raises(ContextBudgetError):
        b.start(instruction="买杯子", max_context_len=n + 6)
    b.start(instruction="买杯子", max_context_len=n + 7)
    ids, lps = _respond(tok, "Thought: x\nAction: search[杯子]")
    b.add_response(tr, ids, lps)
    obs, _ = b.observation_tokens(tr, "短页面")
    used = len(tr.token_ids)
    with pytest.raises(ContextBudgetError):
        b.add_observation(tr, "短页面", max_context_len=used + len(obs) + 6)
    b.add_observation(tr, "短页面", max_context_len=used + len(obs) + 7)


def test_misuse_and_unstable_templates_raise(tok, tmp_path):
    b = PromptBuilder(tok)
    tr = b.start(instruction="x")
    with pytest.raises(prompt_builder.PromptError):
        b.add_observation(tr, "obs before any response")
    with pytest.raises(prompt_builder.PromptError):
        b.add_response(tr, [1, 2], [0.0])

    class Unstable:  # a template whose system line changes with the number of messages
        def __init__(self, inner):
            self.inner = inner

        def apply_chat_template(self, messages, tokenize, add_generation_prompt, **kw):
            text = self.inner.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)
            return f"[{len(messages)} messages]" + text

        def encode(self, text, add_special_tokens=False):
            return self.inner.encode(text, add_special_tokens=add_special_tokens)

        def decode(self, ids, skip_special_tokens=False):
            return self.inner.decode(ids, skip_special_tokens=skip_special_tokens)

    with pytest.raises(TemplateError):
        PromptBuilder(Unstable(tok)).start(instruction="x")


def test_persona_user_message():
    task = {"instruction": "完整说明", "instruction_simple": "想买鞋", "scenario": "persona",
            "persona": {"__reasoning__": "secret", "预算": "300"}}
    msg = prompt_builder.user_message(task)
    assert msg.startswith("想买鞋") and "预算" in msg and "secret" not in msg and "完整说明" not in msg
    assert prompt_builder.user_message({"instruction": "完整说明"}).endswith(prompt_builder.FIRST_PAGE_TAIL)
    assert json.loads(msg.split("用户个人文档：")[1].split("\n")[0]) == {"预算": "300"}


def test_plugin_modules_import_without_click_jsonschema_dotenv_wandb():
    """As in slime's env: those packages absent (an import finder refuses them), ours still load."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "BLOCK = ('click', 'jsonschema', 'dotenv', 'wandb', 'transformers', 'yaml')\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in BLOCK: raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import pyhelpers.policy.prompt_builder, pyhelpers.shopsim.client, pyhelpers.policy.sglang_client, pyhelpers.tasks.files\n"
        "import pyhelpers.tasks.build\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
