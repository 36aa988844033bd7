"""The analyst's prompt (built from spool records) and the parsing of its reply.

The prompt is a pure function of the batch's records: the same batch gives the same messages
and the same `prompt_hash` (sha256 of their canonical JSON, exactly what is sent as
``messages``). Long episodes are clipped: at most MAX_TURNS_SHOWN turns per episode (the first
two and the last ones) and MAX_FIELD_CHARS characters per field (head and tail kept).
"""

from __future__ import annotations

import hashlib
import json
import re

from pyhelpers.jsonfiles import canonical_bytes, validation_errors

MAX_TURNS_SHOWN = 12
MAX_FIELD_CHARS = 600
MAX_REASON_CHARS = 300

SYSTEM = """\
You are the Failure Analyst of a reinforcement-learning run. A small language-model agent shops \
in a simulated web store: it searches, opens products, chooses options and buys, and is scored \
on buying the product that matches the instruction (type, attributes, options, price).

You get records of episodes the agent FAILED. Each record also shows a retry of the same task \
with every known skill in the prompt (the "full-skill retry"), or says that no retry was played. \
If the retry succeeded, the skills it showed probably cover the failure; focus on failures that \
the retry did not fix.

Propose skills: short, general rules the agent should follow (or avoid) in future episodes. \
A skill names WHEN it applies (trigger) and WHAT to do (instruction). Never mention concrete \
products, brands, prices, queries or page text; write rules that transfer to other tasks. \
Propose at most 3 skills per record and at most 16 in total; propose none when nothing general \
can be learned.

Reply with ONE JSON object and nothing else:
{"proposals": [{"title": "3-80 chars", "trigger": "when it applies (3-300 chars)",
  "instruction": "what to do or avoid (3-600 chars)",
  "kind": "search|navigation|inspection|options|price|purchase|other",
  "polarity": "do|avoid", "evidence": ["<record id>", ...]}]}
"evidence" lists the ids of the records (as given, e.g. r0-s3-g1-i0) that the skill is drawn from."""

NUDGE = ("Your previous reply could not be used: {reason}. Reply again with ONE JSON object "
         'of the form {{"proposals": [...]}} exactly as specified: no prose, no code fence.')


class ReplyError(Exception):
    """The model's reply is unusable; the message is the reason recorded in the candidate file."""


def _clip(text: str, limit: int = MAX_FIELD_CHARS) -> str:
    text = str(text)
    if len(text) <= limit:
        return text
    half = (limit - 5) // 2
    return f"{text[:half]} [...] {text[-half:]}"


def _episode(title: str, ep: dict | None) -> list[str]:
    if ep is None:
        return [f"### {title}: not played (no spare slot)"]
    head = (f"### {title}: reward {ep['reward']:g}, success {str(ep['success']).lower()}, "
            f"termination {ep['termination']}, skills shown: {', '.join(ep['skills_shown']) or 'none'}")
    lines = [head]
    if ep.get("reward_detail"):
        lines.append(f"reward detail: {_clip(json.dumps(ep['reward_detail'], sort_keys=True))}")
    turns = ep["turns"]
    shown = list(enumerate(turns, 1))
    if len(turns) > MAX_TURNS_SHOWN:
        tail = MAX_TURNS_SHOWN - 2
        shown = shown[:2] + [(None, None)] + shown[-tail:]
    for n, turn in shown:
        if n is None:
            lines.append(f"({len(turns) - MAX_TURNS_SHOWN} turns omitted)")
            continue
        lines.append(f"turn {n}:")
        for field in ("response", "action", "observation"):
            if turn.get(field):
                lines.append(f"  {field}: {_clip(turn[field])}")
    return lines


def render_record(rec: dict) -> str:
    lines = [f"## Record {rec['id']} (task {rec['task_id']})"]
    if rec.get("instruction"):
        lines.append(f"Instruction: {_clip(rec['instruction'])}")
    lines += _episode("Failed episode", rec["failed"])
    lines += _episode("Full-skill retry", rec["retry"])
    return "\n".join(lines)


def build_messages(records: list[dict]) -> list[dict]:
    """Chat messages for one batch (records in batch order)."""
    body = "\n\n".join(render_record(r) for r in records)
    user = f"{len(records)} failed episode record(s):\n\n{body}\n\nReply with the JSON object only."
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def nudge_messages(messages: list[dict], reply: str, reason: str) -> list[dict]:
    """The one follow-up request after an unusable reply (docs/analyst.md)."""
    return [*messages, {"role": "assistant", "content": _clip(reply, 4000)},
            {"role": "user", "content": NUDGE.format(reason=reason)}]


def prompt_hash(messages: list[dict]) -> str:
    return hashlib.sha256(canonical_bytes(messages)).hexdigest()


_FENCE = re.compile(r"^```[A-Za-z]*\s*\n(.*)\n```$", re.S)


def parse_reply(content: str, record_ids: list[str]) -> tuple[list[dict], int]:
    """(proposals, dropped) from the model's reply text, or ReplyError(reason).

    A reply wrapped in one code fence is unwrapped. The JSON must satisfy proposal.schema.json.
    Evidence ids that are not records of this batch are removed; a proposal left without
    evidence is dropped (counted in `dropped`)."""
    text = content.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    if not text:
        raise ReplyError("reply is empty")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReplyError(f"reply is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
                         f"it starts {text[:60]!r}") from None
    errs = validation_errors(obj, "proposal")
    if errs:
        more = f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
        raise ReplyError(f"reply violates proposal.schema.json at {errs[0]}{more}"[:MAX_REASON_CHARS])
    known = set(record_ids)
    kept, dropped = [], 0
    for prop in obj["proposals"]:
        evidence = sorted({e for e in prop["evidence"] if e in known})
        if not evidence:
            dropped += 1
            continue
        kept.append({**prop, "evidence": evidence})
    return kept, dropped
