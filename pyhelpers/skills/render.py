"""The skills block shown to the policy: pure, cheap, stdlib only.

The rollout plugin (inside slime's environment) and the eval runner both call ``render``; it
never tokenizes. Each skill's line and its token count were computed once, at compile/inject,
with the policy tokenizer (or the documented estimate) and stored in the bank, so both callers
show the same block and drop the same skills.

Views: "active" = status active; "full" = active + probation + candidate (never rejected,
retired or merged); "masked" = exactly the ids in ``mask`` (the gate's subset).

Budget: the block costs the bank's header tokens plus the stored tokens of each shown line.
Skills are considered in priority order -- status (active, probation, candidate, others), then
more proposals first, then id -- and each is kept if it still fits (first fit); the ones that do
not fit are reported in ``dropped`` (in priority order). The kept skills are written in canonical
order: kind (in the order of KIND_ORDER), then id, each line starting with "[<id>]".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

HEADER = "Skills from earlier episodes (cite an id in brackets when you use one):\n"
KIND_ORDER = ("search", "navigation", "inspection", "options", "price", "purchase", "other")
STATUS_RANK = {"active": 0, "probation": 1, "candidate": 2, "retired": 3, "rejected": 4, "merged": 5}
VIEWS = {"active": ("active",), "full": ("active", "probation", "candidate")}


@dataclass(frozen=True)
class Rendered:
    """A rendered block: its text, the ids shown (in text order), its tokens, and the eligible
    ids dropped for the budget (in priority order)."""

    text: str
    skill_ids: tuple[str, ...] = ()
    tokens: int = 0
    dropped: tuple[str, ...] = field(default_factory=tuple)


def skill_line(skill: Mapping) -> str:
    """One skill's line in the block (the text whose tokens are stored in the bank)."""
    verb = "Do" if skill["polarity"] == "do" else "Avoid"
    title = skill["title"].rstrip(" .:")
    trigger = skill["trigger"].rstrip(" .:")
    return f"[{skill['id']}] {title}. When: {trigger}. {verb}: {skill['instruction']}\n"


def priority_key(skill: Mapping) -> tuple:
    """Budget priority: status rank, then more proposals, then id."""
    return (STATUS_RANK.get(skill["status"], 9), -skill["counters"]["proposals"], skill["id"])


def _order_key(skill: Mapping) -> tuple:
    kind = skill["kind"]
    return (KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER), skill["id"])


def render(bank: Mapping, view: str, budget_tokens: int, mask: Iterable[str] | None = None) -> Rendered:
    """Render `bank` for `view` ("active" | "full" | "masked") within `budget_tokens`.

    "masked" needs `mask`, an iterable of skill ids that must all be in the bank (ValueError
    otherwise: a mask from another bank is a bug, not a condition to hide)."""
    skills = bank["skills"]
    if view == "masked":
        if mask is None:
            raise ValueError("render: view 'masked' needs a mask (skill ids)")
        wanted = set(mask)
        chosen = [s for s in skills if s["id"] in wanted]
        missing = wanted - {s["id"] for s in chosen}
        if missing:
            raise ValueError(f"render: mask names skills not in the bank: {sorted(missing)[:5]}")
    elif view in VIEWS:
        statuses = VIEWS[view]
        chosen = [s for s in skills if s["status"] in statuses]
    else:
        raise ValueError(f"render: unknown view {view!r} (active, full or masked)")
    header_tokens = int(bank.get("tokenizer", {}).get("header_tokens", 0))
    used, kept, dropped = header_tokens, [], []
    for s in sorted(chosen, key=priority_key):
        cost = s["render"]["tokens"]
        if used + cost <= budget_tokens:
            kept.append(s)
            used += cost
        else:
            dropped.append(s["id"])
    if not kept:
        return Rendered("", (), tokens=0, dropped=tuple(dropped))
    kept.sort(key=_order_key)
    text = HEADER + "".join(s["render"]["text"] for s in kept)
    return Rendered(text, tuple(s["id"] for s in kept), tokens=used, dropped=tuple(dropped))
