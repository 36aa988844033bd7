"""How ShopSimulator reads an action out of the model's text, and what we send it instead when it
would miss one. shop_agent.py keeps what follows the first "\\nAction: "; engine.parse_action
matches `(.+)\\[(.+)\\]` on its first line; only `search` and `click` do anything, everything else
is a silent no-op. Also the page text helpers the policy uses (persona instruction, buttons).
Stdlib only, like shopsim/protocol.py: the rollout plugin imports it inside slime's env.
See docs/shopsim_protocol.md for the sources.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

ACTION_SPLIT = "\nAction: "
ACTIONS = ("search", "click")


@dataclass(frozen=True)
class Action:
    kind: str  # "search" | "click"
    arg: str   # as the server uses it: lower-cased

    def __str__(self) -> str:
        return format_action(self.kind, self.arg)


_SERVER_ACTION = re.compile(r"(.+)\[(.+)\]")  # engine.parse_action, used with re.match
_LOOSE_ACTION = re.compile(r"^[ \t*#>-]*action\s*[:：]\s*\**\s*(search|click)\s*\[(.+)\]", re.I | re.M)


def format_action(kind: str, arg: str) -> str:
    """`search[arg]` / `click[arg]`, the only two forms pack_api acts on."""
    if kind not in ACTIONS:
        raise ValueError(f"action kind must be one of {ACTIONS}, got {kind!r}")
    arg = str(arg).strip()
    if not arg or "\n" in arg:
        raise ValueError(f"action argument must be one non-empty line, got {arg!r}")
    return f"{kind}[{arg}]"


def format_response(thought: str, kind: str, arg: str) -> str:
    """A response in the prompt's format, which pack_api parses: "Thought: …\\nAction: kind[arg]"."""
    return f"Thought: {thought.strip()}{ACTION_SPLIT}{format_action(kind, arg)}"


def strip_thinking(response: str) -> str:
    """The text after the last </think> (what upstream's agent sends), else the text itself."""
    return response.split("</think>")[-1].strip("\n") if "</think>" in response else response


def server_view(response: str) -> str:
    """Exactly the action text pack_api hands to env.step for this response."""
    text = response.replace("\\n", "\n")
    return text.split(ACTION_SPLIT)[1] if ACTION_SPLIT in text else text


def parse_server_action(action_text: str) -> Action | None:
    """engine.parse_action + WebAgentTextEnv.step: the action the server performs, or None (no-op).
    A click on a button that is not on the page is a no-op too; that is not knowable here."""
    m = _SERVER_ACTION.match(action_text)
    if m is None:
        return None
    kind, arg = m.groups()
    if kind not in ACTIONS or not arg.strip() or (kind == "click" and arg.lower() == "search"):
        return None
    return Action(kind, arg.lower())


def extract_action(response: str) -> Action | None:
    """The action pack_api will perform for this raw response (None = silent no-op)."""
    return parse_server_action(server_view(response))


def _loose_match(text: str):
    matches = list(_LOOSE_ACTION.finditer(text))
    return matches[-1] if matches else None


def intended_action(response: str) -> Action | None:
    """The action the response states, read leniently (after </think>; the last "Action:" at a line
    start, any case, full-width colon, no space). Used to repair the wire text; None when absent."""
    text = strip_thinking(response)
    exact = extract_action(text)
    if exact is not None:
        return exact
    m = _loose_match(text)
    return Action(m.group(1).lower(), m.group(2).strip().lower()) if m else None


def wire_response(response: str, *, normalize: bool = True) -> str:
    """The text to send to interact for a model response.

    The raw text when pack_api would perform the action the response states (the usual case). With
    normalize, a response whose action pack_api would miss (thinking before it, "Action:" on the
    first line, no space, full-width colon) is sent as "<thought>\\nAction: kind[arg]" instead. A
    response with no recognisable action goes raw: a no-op upstream too. The tokens the policy is
    trained on are never changed by this; only what the server reads."""
    if not normalize:
        return response
    wanted = intended_action(response)
    if wanted is None or extract_action(response) == wanted:
        return response
    text = strip_thinking(response).replace("\\n", "\n")
    m = _loose_match(text)
    prefix = text[:m.start()] if m else text.split(ACTION_SPLIT)[0]
    prefix = prefix.replace(ACTION_SPLIT, "\n").strip() or "Thought:"
    wire = f"{prefix}{ACTION_SPLIT}{format_action(wanted.kind, wanted.arg)}"
    return wire if extract_action(wire) == wanted else response


def persona_observation(observation: str, instruction_simple: str) -> str:
    """Persona scenario: replace the full instruction in a page text with the vague one, as
    upstream's single_eval/env.py does (second [SEP]-separated field)."""
    parts = observation.split("[SEP]", 2)
    if len(parts) < 3:
        return observation
    return f"{parts[0]}[SEP] {instruction_simple} [SEP]{parts[2]}"


def clickables(observation: str) -> list[str] | None:
    """The button list pack_api appends to each page ("可点击的按钮: [...]"), or None."""
    marker = "可点击的按钮: "
    at = observation.rfind(marker)
    if at < 0:
        return None
    try:
        value = json.loads(observation[at + len(marker):].strip())
    except ValueError:
        return None
    return [str(v) for v in value] if isinstance(value, list) else None
