#!/usr/bin/env python3
"""How many turns of a ShopSimulator episode fit ROLLOUT_MAX_CONTEXT_LEN, with Qwen3.5's thinking.

Qwen3.5's generation prompt opens a reasoning block (`<|im_start|>assistant\\n<think>\\n`), so every
turn's response is reasoning + `</think>` + the Thought/Action answer. The toolkit appends tokens
and never re-renders (pyhelpers/policy/prompt_builder.py), so every earlier turn's reasoning stays
in the episode's context (docs/training.md, "Thinking"). This bench plays synthetic episodes
through the real prompt builder and counts the turns that fit, for reasoning lengths and page
sizes, under two policies:

  keep   the toolkit's: the token stream as generated (earlier reasoning kept);
  drop   what a re-render with the chat template would give (Qwen3.5's template drops the
         reasoning of every assistant turn before the last user message): measured by rendering
         the conversation with the template before each turn.

A turn fits when its prompt plus the response's tokens stay within the budget (the plugin also
caps each turn at ROLLOUT_MAX_RESPONSE_LEN; a response longer than the room left is cut, which
ends the episode as context_budget). Token counts come from the tokenizer given (--tokenizer: the
policy's HF directory, e.g. models/Qwen3.5-4B); without one, from the tests' Qwen3.5-shaped
fixture tokenizer, whose tiny vocabulary makes every text several times longer in tokens than
Qwen's -- then only the ratios between rows mean anything. Responses and pages can also come from
real spool records (--spool rounds/round-NNN/spool): their median observation size is used.

Example:
  python3 bench/context_turns.py                                   # fixture tokenizer, default grid
  python3 bench/context_turns.py --tokenizer /data/models/Qwen3.5-4B --context 24576 \\
      --reasoning 0,256,512,1024,2048 --page 400,800,1600
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))
from arglists import ints  # noqa: E402  (bench/, also when run through runpy)

FILLER = ("先看看页面上的商品，标题里有颜色和尺码，价格要在预算以内。The option list shows size and color; "
          "compare the price with the budget before clicking. ")
ANSWER = "Thought: 这个商品符合要求，先选规格。\nAction: click[b0001]"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokenizer", type=Path, help="HF model dir of the policy (default: the test fixture)")
    p.add_argument("--context", type=int, default=24576, help="ROLLOUT_MAX_CONTEXT_LEN")
    p.add_argument("--response", type=int, default=4096, help="ROLLOUT_MAX_RESPONSE_LEN")
    p.add_argument("--max-turns", type=int, default=20, help="MAX_TURNS")
    p.add_argument("--skills", type=int, default=1024, help="skills block size, tokens (SKILL_TOKEN_BUDGET)")
    p.add_argument("--reasoning", type=ints, default=[0, 256, 1024, 2048], help="reasoning tokens per turn")
    p.add_argument("--page", type=ints, default=[400, 1200], help="observation tokens per turn")
    p.add_argument("--spool", type=Path, help="a spool dir: use the median observation of its records")
    p.add_argument("--json", action="store_true", help="print the rows as JSON lines")
    return p.parse_args(argv)


def load_tokenizer(path: Path | None):
    import transformers

    if path is None:
        from support.tokenizer import build_tokenizer

        path = build_tokenizer(Path(tempfile.mkdtemp(prefix="context-turns-")) / "tok")
    return transformers.AutoTokenizer.from_pretrained(path, trust_remote_code=True), str(path)


def text_of(tok, n: int) -> str:
    """A text of exactly n tokens (its own encoding), cut from repeated filler."""
    if n <= 0:
        return ""
    ids = tok.encode(FILLER * (n // 8 + 2), add_special_tokens=False)[:n]
    text = tok.decode(ids)
    while len(tok.encode(text, add_special_tokens=False)) > n:  # a cut inside a character
        text = text[:-1]
    return text


def spool_pages(spool: Path) -> list[str]:
    pages = []
    for f in sorted(spool.glob("*.json")):
        rec = json.loads(f.read_text(encoding="utf-8"))
        for turn in rec.get("failed", {}).get("turns", []):
            if turn.get("observation"):
                pages.append(turn["observation"])
    return pages


def play(builder, tok, reasoning: str, page: str, a: argparse.Namespace, keep: bool) -> int:
    """Turns that fit under one policy."""
    from pyhelpers.policy.prompt_builder import ContextBudgetError

    tr = builder.start({"instruction": "我想买一双白色的运动鞋，预算三百元以内"}, skills_block=text_of(tok, a.skills),
                       max_context_len=a.context)
    response = f"{reasoning}\n</think>\n\n{ANSWER}" if reasoning else f"\n</think>\n\n{ANSWER}"
    ids = tok.encode(response, add_special_tokens=False) + [tok.eos_token_id]
    turns = 0
    while turns < a.max_turns:
        if keep:
            used = len(tr.token_ids)
        else:  # what the template's own render of the conversation so far would cost
            text = builder.render(tr.messages, add_generation_prompt=True)
            used = len(tok.encode(text, add_special_tokens=False))
        if used + min(len(ids), a.response) > a.context:
            break
        builder.add_response(tr, ids, None, response)
        turns += 1
        try:
            builder.add_observation(tr, page, max_context_len=a.context if keep else None)
        except ContextBudgetError:
            break
    return turns


def main(argv: list[str]) -> int:
    a = parse_args(argv)
    from pyhelpers.policy.prompt_builder import PromptBuilder

    tok, where = load_tokenizer(a.tokenizer)
    builder = PromptBuilder(tok)
    pages = {n: text_of(tok, n) for n in a.page}
    if a.spool:
        real = spool_pages(a.spool)
        if real:
            median = sorted(real, key=len)[len(real) // 2]
            pages[len(tok.encode(median, add_special_tokens=False))] = median  # a row of its own
            print(f"median page of {len(real)} spooled observations: {len(tok.encode(median))} tokens")
    first = builder.start({"instruction": "我想买一双白色的运动鞋，预算三百元以内"}, skills_block=text_of(tok, a.skills))
    answer = len(tok.encode(f"\n</think>\n\n{ANSWER}", add_special_tokens=False)) + 1
    print(f"tokenizer {where}; context {a.context}, response cap {a.response}, max turns {a.max_turns}; "
          f"first prompt {first.prompt_len} tokens (skills block {a.skills}), answer after the reasoning "
          f"{answer} tokens")
    print(f"{'reasoning':>9} {'page':>6} {'turns keep':>10} {'turns drop':>10}")
    for r in a.reasoning:
        reasoning = text_of(tok, r)
        for n, page in sorted(pages.items()):
            row = {"reasoning_tokens": r, "page_tokens": n,
                   "turns_keep": play(builder, tok, reasoning, page, a, keep=True),
                   "turns_drop": play(builder, tok, reasoning, page, a, keep=False)}
            if a.json:
                print(json.dumps(row))
            else:
                print(f"{r:>9} {n:>6} {row['turns_keep']:>10} {row['turns_drop']:>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
