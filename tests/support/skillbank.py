"""Small builders of analyst batches and banks for the SkillBank tests."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pyhelpers.skills.bank import empty_bank
from pyhelpers.skills.compile import compile_bank
from support.knobs import compile_options

PROMPT = "ab" * 32


def prop(trigger: str, instruction: str, *, title: str = "A skill", kind: str = "options",
         polarity: str = "do", evidence: tuple[str, ...] = ("r0-s0-g0-i0",)) -> dict:
    return {"title": title, "trigger": trigger, "instruction": instruction, "kind": kind,
            "polarity": polarity, "evidence": list(evidence)}


def batch(proposals: list[dict], *, round_: int = 0, status: str = "ok", tag: str = "") -> dict:
    rids = sorted({e for p in proposals for e in p["evidence"]}) or [f"r{round_}-s0-g0-i0"]
    content = json.dumps([rids, proposals, status, tag], sort_keys=True)  # distinct batches, distinct ids
    bid = hashlib.sha256(content.encode()).hexdigest()[:16]
    return {"schema_version": 1, "batch_id": bid, "round": round_, "record_ids": rids,
            "analyst_model": "qwen-plus", "prompt_hash": PROMPT, "status": status,
            "reason": None if status == "ok" else "bad JSON", "proposals": proposals if status == "ok" else []}


def write_batches(directory: Path, batches: list[dict]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for b in batches:
        (directory / f"{b['batch_id']}.json").write_text(json.dumps(b))
    return directory


def bank_of(texts: list[tuple[str, str]], statuses: list[str] | None = None, round_: int = 0,
            **kw) -> dict:
    """A compiled bank holding one skill per (trigger, instruction), statuses set in order of
    the texts."""
    props = [prop(t, i, title=f"Skill {n}", evidence=(f"r0-s0-g0-i{n}",), **kw) for n, (t, i) in enumerate(texts)]
    bank = compile_bank(empty_bank(round_), [batch([p]) for p in props], round_, compile_options())
    if statuses:
        from pyhelpers.skills.text import skill_id, text_sha256

        by_id = {s["id"]: s for s in bank["skills"]}
        for (t, i), st in zip(texts, statuses, strict=False):
            by_id[skill_id(text_sha256(t, i))]["status"] = st
    return bank


def sid(trigger: str, instruction: str) -> str:
    from pyhelpers.skills.text import skill_id, text_sha256

    return skill_id(text_sha256(trigger, instruction))
