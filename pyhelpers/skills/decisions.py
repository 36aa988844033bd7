"""Bank side of the gate: which skills it tests, and the next bank from its decisions.

select_for_gate: probation skills first (their test is unfinished), then candidates; within each,
more proposals first, then id; at most max_skills. With include_active=True the active skills
come first (to re-gate them, e.g. to detect internalised skills).

apply_decisions (skillbank.md step 5), for each decided skill (sorted by id):
  accept -> active; reject -> rejected; retire -> retired;
  keep   -> probation (an active skill stays active), except that a skill that has now been
            tested in max_gate_rounds rounds (GATE_MAX_ROUNDS) is retired ("not proven").
Every decision appends a gate result (round, decision, estimate, CI, n[, se, p_value]) and counts
one gate round; the history event's note holds the effect and the gate's "reason" when given.
Then the caps: the active skills are ranked by last gate ci_low (higher first; no gate result
counts as 0.0), then estimate (higher), then tokens (fewer), then proposals (more), then id, and
kept first-fit while the count stays <= max_active (BANK_MAX_ACTIVE) and header + line tokens
stay <= token_budget (SKILL_TOKEN_BUDGET), so the "active" view never drops a skill; the others
are retired with a CAP event naming the cap. The result is the next round's bank:
round + 1, parent_sha256 = sha256 of the input bank, config.inject = the caps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

from pyhelpers.errors import ToolkitError
from pyhelpers.skills.bank import LIVE, MAX_GATE, add_event, bank_sha256, copy_bank

DECISIONS = ("accept", "reject", "retire", "keep")
_RESULT_FIELDS = ("decision", "estimate", "ci_low", "ci_high", "n", "se", "p_value")


@dataclass(frozen=True)
class Caps:
    """Knob values of inject (recorded in bank.config.inject)."""

    max_active: int        # BANK_MAX_ACTIVE
    token_budget: int      # SKILL_TOKEN_BUDGET
    max_gate_rounds: int   # GATE_MAX_ROUNDS


def select_for_gate(bank: Mapping, max_skills: int, include_active: bool = False) -> list[str]:
    """Ids the gate tests this round, in priority order (see module doc)."""
    tiers = (("active",) if include_active else ()) + ("probation", "candidate")
    rank = {status: i for i, status in enumerate(tiers)}
    pool = [s for s in bank["skills"] if s["status"] in rank]
    pool.sort(key=lambda s: (rank[s["status"]], -s["counters"]["proposals"], s["id"]))
    return [s["id"] for s in pool[:max(0, max_skills)]]


def _cap_key(skill: Mapping) -> tuple:
    last = skill["gate"][-1] if skill["gate"] else {"ci_low": 0.0, "estimate": 0.0}
    return (-last["ci_low"], -last["estimate"], skill["render"]["tokens"],
            -skill["counters"]["proposals"], skill["id"])


def _next_status(skill: Mapping, decision: str, caps: Caps) -> tuple[str, str, str | None]:
    if decision == "accept":
        return "active", "ACCEPT", None
    if decision == "reject":
        return "rejected", "REJECT", None
    if decision == "retire":
        return "retired", "RETIRE", None
    if skill["status"] == "active":
        return "active", "KEEP", None
    if skill["counters"]["gate_rounds"] >= caps.max_gate_rounds:
        return "retired", "RETIRE", f"not proven after {skill['counters']['gate_rounds']} gate rounds"
    return "probation", "KEEP", None


def apply_decisions(bank: Mapping, decisions: Mapping[str, Mapping], round: int, caps: Caps) -> dict:
    """The bank of round `round` + 1 from the compiled bank of `round` and its gate decisions
    (skill id -> {decision, estimate, ci_low, ci_high, n[, se, p_value, ...]})."""
    out = copy_bank(bank)
    skills = {s["id"]: s for s in out["skills"]}
    for sid in sorted(decisions):
        d = decisions[sid]
        if sid not in skills:
            raise ToolkitError("gate decision for a skill that is not in the bank", sid,
                               "run inject with the compiled bank the gate tested")
        s = skills[sid]
        if s["status"] not in LIVE:
            raise ToolkitError(f"gate decision for a {s['status']} skill", sid,
                               "the gate tests only active, probation and candidate skills")
        if d["decision"] not in DECISIONS:
            raise ToolkitError(f"unknown gate decision {d['decision']!r}", sid, f"use one of {', '.join(DECISIONS)}")
        result = {"round": round, **{k: d[k] for k in _RESULT_FIELDS if k in d and d[k] is not None}}
        s["gate"] = (s["gate"] + [result])[-MAX_GATE:]
        s["counters"]["gate_rounds"] += 1
        status, op, note = _next_status(s, d["decision"], caps)
        s["status"] = status
        effect = f"{d['estimate']:+.4f} [{d['ci_low']:+.4f}, {d['ci_high']:+.4f}] n={d['n']}"
        add_event(s, round, op, note=note or (f"{effect}; {d['reason']}" if d.get("reason") else effect))
        s["updated_round"] = round

    used = int(out.get("tokenizer", {}).get("header_tokens", 0))
    kept = 0
    for s in sorted((s for s in skills.values() if s["status"] == "active"), key=_cap_key):
        tokens = s["render"]["tokens"]
        if kept < caps.max_active and used + tokens <= caps.token_budget:
            kept += 1
            used += tokens
            continue
        which = "BANK_MAX_ACTIVE" if kept >= caps.max_active else "SKILL_TOKEN_BUDGET"
        s["status"] = "retired"
        add_event(s, round, "CAP", note=f"over {which}")
        s["updated_round"] = round

    out["round"] = round + 1
    out["parent_sha256"] = bank_sha256(bank)
    out["config"] = {**out.get("config", {}), "inject": asdict(caps)}
    out["skills"] = [skills[sid] for sid in sorted(skills)]
    return out
