"""The one prompt builder of evaluation and training rollouts: chat template once, then tokens.

Both the eval runner and the slime rollout plugin build an episode's token stream here, so val and
gate see exactly what training sees (both send token ids to SGLang's /generate). The chat template is rendered ONCE, to
the initial prompt (system prompt + skills block, the task's user message, generation prompt).
After that nothing is re-rendered: each turn appends

- the policy's response: the exact `output_ids` and their log-probs from SGLang's /generate,
  loss mask 1;
- the observation: the tokens the template puts after an assistant turn's content when the next
  turn is an observation message, up to and including the next generation prompt, loss mask 0.

Template-suffix method: the observation's tokens come from rendering the conversation so far with
a placeholder as the last assistant content, plus the observation message and a generation prompt,
and taking the text after the placeholder ("<|im_end|>\\n<|im_start|>user\\nOBS<|im_end|>\\n
<|im_start|>assistant\\n" for ChatML). It is tokenized on its own; when the response already ends
with the suffix's first token (the end-of-turn token the model emitted), that token is not repeated.
The template must be prefix-stable: the initial prompt must open the assistant turn the way the
template renders one, the rendered history must keep the first messages unchanged, and every
observation must end in the same generation prompt. Otherwise TemplateError is raised (never a
silent mismatch between what the model saw and what is trained).

Imports: stdlib and pyhelpers' stdlib modules only; the tokenizer is passed in (a transformers
tokenizer, or anything with `apply_chat_template(..., tokenize=False)` and `encode`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pyhelpers.policy.system_prompt import PROMPT_VERSION, SYSTEM_PROMPT
from pyhelpers.shopsim.actions import Action, extract_action, intended_action  # noqa: F401  (re-exported)

# What SGLang 0.5.15.post1 takes for --context-length L (= ROLLOUT_MAX_CONTEXT_LEN). Its tokenizer
# manager accepts prompt + max_new_tokens == L (tokenizer_manager.py:973-997), but the scheduler
# aborts (HTTP 400) a prompt of max_req_input_len = L - 1 - 5 tokens or more (tp_worker.py:455-465,
# managers/utils.py:177) and cuts max_new_tokens to max_req_len - prompt - 1 = L - 2 - prompt
# (scheduler.py:1905-1916). A budget of L - prompt would be silently shortened by 2 tokens.
SGLANG_PROMPT_MARGIN = 6   # a prompt must stay below L - 6 tokens
SGLANG_TOTAL_MARGIN = 2    # prompt + generated tokens stay within L - 2
PLACEHOLDER = "QZXPLACEHOLDERXZQ"
# The first page of an episode as upstream's agent shows it (single_eval/agent.py): reset returns
# no page text, only the instruction; the search box is the one thing on the index page.
FIRST_PAGE_TAIL = "\n\n搜索功能是否可用: True\n\n可点击的按钮: []"


class PromptError(Exception):
    """The prompt cannot be built as asked."""


class TemplateError(PromptError):
    """The chat template is not prefix-stable, so appended turns would differ from a re-render."""


class ContextBudgetError(PromptError):
    """The tokens would exceed the episode's context budget (ROLLOUT_MAX_CONTEXT_LEN)."""


def fits_prompt(n_tokens: int, max_context_len: int) -> bool:
    """SGLang takes a prompt of n_tokens and can generate at least one token after it."""
    return n_tokens < max_context_len - SGLANG_PROMPT_MARGIN


@dataclass(frozen=True)
class Segment:
    kind: str  # "prompt" | "response" | "observation"
    start: int
    end: int
    text: str


@dataclass
class Transcript:
    """One episode's token stream. token_ids/loss_mask/logprobs are aligned, one entry per token;
    the prompt's entries are mask 0 / log-prob 0.0. slime's Sample takes `tokens=token_ids`,
    `response_length`, `loss_mask=response_mask` and `rollout_log_probs=response_logprobs`."""

    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)
    prompt_len: int = 0
    prompt_version: str = PROMPT_VERSION
    template_head: str = field(default="", repr=False)  # the first messages, rendered (no gen prompt)
    gen_prompt: str = field(default="", repr=False)     # what the template adds to open a turn

    @property
    def text(self) -> str:
        return "".join(s.text for s in self.segments)

    @property
    def prompt_text(self) -> str:
        return self.segments[0].text if self.segments else ""

    @property
    def response_ids(self) -> list[int]:
        return self.token_ids[self.prompt_len:]

    @property
    def response_mask(self) -> list[int]:
        return self.loss_mask[self.prompt_len:]

    @property
    def response_logprobs(self) -> list[float]:
        return self.logprobs[self.prompt_len:]

    @property
    def response_length(self) -> int:
        return len(self.token_ids) - self.prompt_len

    @property
    def turns(self) -> int:
        return sum(1 for s in self.segments if s.kind == "response")

    def budget_left(self, max_context_len: int) -> int:
        """Tokens SGLang will still generate after this transcript (0: it would refuse the prompt)."""
        if not fits_prompt(len(self.token_ids), max_context_len):
            return 0
        return max_context_len - SGLANG_TOTAL_MARGIN - len(self.token_ids)

    def _append(self, kind: str, ids: list[int], mask: int, logprobs: list[float], text: str) -> None:
        start = len(self.token_ids)
        self.token_ids.extend(ids)
        self.loss_mask.extend([mask] * len(ids))
        self.logprobs.extend(logprobs)
        self.segments.append(Segment(kind, start, end=len(self.token_ids), text=text))


def compose_system(system_prompt: str, skills_block: str = "") -> str:
    """System message = system prompt, then the rendered skills block (if any)."""
    block = (skills_block or "").strip("\n")
    return f"{system_prompt}\n\n{block}" if block else system_prompt


def user_message(task: dict) -> str:
    """The first user message for a task record (pyhelpers/schemas/task.schema.json). Persona
    tasks show the vague instruction plus the profile, as upstream's persona mode does."""
    if task.get("scenario") == "persona" and task.get("persona"):
        head = task.get("instruction_simple") or task["instruction"]
        persona = {k: v for k, v in task["persona"].items() if k != "__reasoning__"}
        head += "\n\n用户个人文档：" + json.dumps(persona, ensure_ascii=False, sort_keys=True)
    else:
        head = task["instruction"]
    return head + FIRST_PAGE_TAIL


class PromptBuilder:
    """Builds Transcripts for one tokenizer + system prompt + template options."""

    def __init__(self, tokenizer: Any, *, system_prompt: str = SYSTEM_PROMPT, observation_role: str = "user",
                 template_kwargs: dict | None = None):
        self.tokenizer, self.system_prompt = tokenizer, system_prompt
        self.observation_role = observation_role
        self.template_kwargs = dict(template_kwargs or {})
        special = getattr(tokenizer, "all_special_ids", None)
        self._special = set(special) if special is not None else None

    # -------------------------------------------------------------- template access
    def render(self, messages: list[dict], *, add_generation_prompt: bool) -> str:
        try:
            text = self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                      add_generation_prompt=add_generation_prompt,
                                                      **self.template_kwargs)
        except Exception as exc:  # jinja errors, missing template
            raise TemplateError(f"chat template failed to render: {exc}") from exc
        if not isinstance(text, str):
            raise TemplateError("apply_chat_template(tokenize=False) did not return text")
        return text

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def _suffix_after_placeholder(self, messages: list[dict], head: str) -> tuple[str, str]:
        text = self.render(messages, add_generation_prompt=True)
        if text.count(PLACEHOLDER) != 1:
            raise TemplateError("the template does not render assistant content verbatim")
        before, after = text.split(PLACEHOLDER)
        if not before.startswith(head):
            raise TemplateError("re-rendering the conversation changes its first messages (not prefix-stable)")
        return before, after

    # -------------------------------------------------------------- episode
    def messages_for(self, task: dict | None = None, *, instruction: str | None = None,
                     skills_block: str = "") -> list[dict]:
        if task is None:
            if instruction is None:
                raise PromptError("give a task record or an instruction")
            task = {"instruction": instruction}
        return [{"role": "system", "content": compose_system(self.system_prompt, skills_block)},
                {"role": "user", "content": user_message(task)}]

    def start(self, task: dict | None = None, *, instruction: str | None = None, skills_block: str = "",
              max_context_len: int | None = None) -> Transcript:
        """Render the initial prompt once (generation prompt appended) and check the template."""
        messages = self.messages_for(task, instruction=instruction, skills_block=skills_block)
        head = self.render(messages, add_generation_prompt=False)
        prompt = self.render(messages, add_generation_prompt=True)
        if not prompt.startswith(head):
            raise TemplateError("the generation prompt is not appended after the messages")
        opened, _ = self._suffix_after_placeholder(
            messages + [{"role": "assistant", "content": PLACEHOLDER}], head)
        if not opened.startswith(prompt):
            raise TemplateError("the generation prompt does not open an assistant turn the way the "
                                "template renders one")
        ids = self.encode(prompt)
        if max_context_len is not None and not fits_prompt(len(ids), max_context_len):
            raise ContextBudgetError(f"initial prompt has {len(ids)} tokens, budget {max_context_len} less "
                                     f"SGLang's {SGLANG_PROMPT_MARGIN}-token margin "
                                     "(shorten the skills block: SKILL_TOKEN_BUDGET, or raise ROLLOUT_MAX_CONTEXT_LEN)")
        tr = Transcript(messages=[dict(m) for m in messages], prompt_len=len(ids), template_head=head,
                        gen_prompt=prompt[len(head):])
        tr._append("prompt", ids, mask=0, logprobs=[0.0] * len(ids), text=prompt)
        return tr

    def add_response(self, tr: Transcript, output_ids: list[int], logprobs: list[float] | None = None,
                     text: str | None = None) -> None:
        """Append the policy's tokens exactly as /generate returned them (loss mask 1)."""
        if tr.segments and tr.segments[-1].kind == "response":
            raise PromptError("two responses in a row: add the observation first")
        ids = [int(t) for t in output_ids]
        if logprobs is None:
            logprobs = [0.0] * len(ids)
        if len(logprobs) != len(ids):
            raise PromptError(f"{len(ids)} output ids but {len(logprobs)} log-probs")
        if text is None:
            text = self.decode(ids)
        tr._append("response", ids, mask=1, logprobs=[float(x) for x in logprobs], text=text)
        tr.messages.append({"role": "assistant", "content": text})

    def observation_tokens(self, tr: Transcript, observation: str) -> tuple[list[int], str]:
        """The tokens (and text) that follow the last response for this observation, ending in the
        next generation prompt. Pure: tr is not changed."""
        if not tr.segments or tr.segments[-1].kind != "response":
            raise PromptError("an observation must follow a response")
        history = tr.messages[:-1] + [{"role": "assistant", "content": PLACEHOLDER},
                                      {"role": self.observation_role, "content": observation}]
        _, suffix = self._suffix_after_placeholder(history, tr.template_head)
        if tr.gen_prompt and not suffix.endswith(tr.gen_prompt):
            raise TemplateError("the observation turn does not end in the same generation prompt")
        ids = self.encode(suffix)
        last = tr.token_ids[-1] if tr.response_length else None
        if ids and last is not None and ids[0] == last and (self._special is None or last in self._special):
            ids, suffix = ids[1:], suffix[len(self.decode([last])):]  # the model already closed its turn
        return ids, suffix

    def add_observation(self, tr: Transcript, observation: str, *, max_context_len: int | None = None) -> int:
        """Append an observation (loss mask 0). With max_context_len, refuse (ContextBudgetError,
        tr unchanged) when SGLang would refuse the result as a prompt (fits_prompt)."""
        ids, text = self.observation_tokens(tr, observation)
        if max_context_len is not None and not fits_prompt(len(tr.token_ids) + len(ids), max_context_len):
            raise ContextBudgetError(f"observation of {len(ids)} tokens exceeds the context budget "
                                     f"({len(tr.token_ids)} used of {max_context_len}, less SGLang's "
                                     f"{SGLANG_PROMPT_MARGIN}-token margin)")
        tr._append("observation", ids, mask=0, logprobs=[0.0] * len(ids), text=text)
        tr.messages.append({"role": self.observation_role, "content": observation})
        return len(ids)

    @staticmethod
    def max_new_tokens(tr: Transcript, max_context_len: int, max_response_len: int) -> int:
        """max_new_tokens for the next /generate: ROLLOUT_MAX_RESPONSE_LEN, capped by what SGLang will
        generate within ROLLOUT_MAX_CONTEXT_LEN (budget_left; 0 = the budget is spent: stop the episode)."""
        return max(0, min(max_response_len, tr.budget_left(max_context_len)))
