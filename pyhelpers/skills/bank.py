"""Bank and skill records: construction, bounded merges, hashes, validated load and write.

A bank file (schema bank.schema.json) is canonical JSON (jsonfiles.canonical_bytes) with
schema_version, round, parent_sha256 (sha256 of the parent bank's canonical bytes; null for a
first bank), tokenizer {name, header_tokens}, config (the knob values its producers used) and
skills sorted by id. A skill follows skill.schema.json. No wall-clock fields anywhere.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from pyhelpers import jsonfiles
from pyhelpers.errors import ToolkitError
from pyhelpers.skills.render import HEADER, skill_line

SCHEMA_VERSION = 1
MAX_RECORD_IDS = 32   # provenance.record_ids: the lexicographically first 32 distinct ids
MAX_BATCH_IDS = 32
MAX_MODELS = 8        # provenance.analyst_models / prompt_hashes
MAX_HISTORY = 64      # first event (creation) + the 63 most recent
MAX_GATE = 16         # gate results, most recent kept
LIVE = ("active", "probation", "candidate")


def bank_sha256(bank: Mapping) -> str:
    """sha256 of a bank's canonical bytes (what a child bank records as parent_sha256)."""
    return hashlib.sha256(jsonfiles.canonical_bytes(bank)).hexdigest()


def empty_bank(round: int = 0, tokenizer: str = "estimate-v1", header_tokens: int = 0) -> dict:
    return {"schema_version": SCHEMA_VERSION, "round": round, "parent_sha256": None,
            "tokenizer": {"name": tokenizer, "header_tokens": header_tokens}, "config": {}, "skills": []}


def status_counts(bank: Mapping) -> dict[str, int]:
    """{status: number of skills}, only the statuses present."""
    counts: dict[str, int] = {}
    for s in bank.get("skills", []):
        counts[s["status"]] = counts.get(s["status"], 0) + 1
    return counts


def status_line(bank: Mapping) -> str:
    """'2 active, 1 candidate' (sorted by status), or 'empty'."""
    return ", ".join(f"{v} {k}" for k, v in sorted(status_counts(bank).items())) or "empty"


def copy_bank(bank: Mapping) -> dict:
    """A deep copy (JSON round trip: banks are plain JSON)."""
    return json.loads(json.dumps(bank))


def check_bank(bank: Mapping, where: str) -> dict:
    """Schema validation plus the rules a schema cannot say: unique ids sorted, merged_into
    pointing at a skill of the bank."""
    jsonfiles.validate(bank, "bank", where)
    ids = [s["id"] for s in bank["skills"]]
    if ids != sorted(set(ids)):
        raise ToolkitError("skills not sorted by id or ids repeated", f"{where} at $.skills",
                           "write banks with pyhelpers skillbank (it sorts them)")
    known = set(ids)
    for i, s in enumerate(bank["skills"]):
        if s.get("merged_into") is not None and s["merged_into"] not in known:
            raise ToolkitError("merged_into names a skill that is not in the bank",
                               f"{where} at $.skills[{i}].merged_into", "fix or regenerate the bank")
    return dict(bank)


def load_bank(path: Path) -> dict:
    """Read and validate a bank file; errors name the file, the JSON path and the rule."""
    return check_bank(jsonfiles.load_json(path), str(path))


def write_bank(path: Path, bank: Mapping) -> str:
    """Validate, then write atomically in canonical form; returns the file's sha256."""
    check_bank(bank, str(path))
    jsonfiles.write_json_atomic(Path(path), bank)
    return bank_sha256(bank)


def add_event(skill: dict, round: int, op: str, count: int | None = None, note: str | None = None) -> None:
    """Append a history event, keeping the first (creation) event and the most recent ones."""
    ev: dict = {"round": round, "op": op}
    if count is not None:
        ev["count"] = count
    if note:
        ev["note"] = note[:200]
    hist = skill["history"]
    hist.append(ev)
    if len(hist) > MAX_HISTORY:
        skill["history"] = hist[:1] + hist[-(MAX_HISTORY - 1):]


def _bounded_union(old: Iterable[str], new: Iterable[str], cap: int) -> list[str]:
    return sorted(set(old) | set(new))[:cap]


def merge_provenance(prov: dict, other: Mapping) -> None:
    """Fold another provenance into `prov` (sorted, bounded unions: order-independent)."""
    prov["record_ids"] = _bounded_union(prov["record_ids"], other.get("record_ids", ()), MAX_RECORD_IDS)
    prov["batch_ids"] = _bounded_union(prov["batch_ids"], other.get("batch_ids", ()), MAX_BATCH_IDS)
    prov["analyst_models"] = _bounded_union(prov["analyst_models"], other.get("analyst_models", ()), MAX_MODELS)
    prov["prompt_hashes"] = _bounded_union(prov["prompt_hashes"], other.get("prompt_hashes", ()), MAX_MODELS)


def empty_provenance() -> dict:
    return {"record_ids": [], "batch_ids": [], "analyst_models": [], "prompt_hashes": []}


def new_skill(sid: str, sha: str, fields: Mapping, round: int, status: str = "candidate") -> dict:
    """A skill record for new wording `fields` (title, trigger, instruction, kind, polarity);
    render text/tokens are filled by set_render."""
    skill = {
        "id": sid, "version": 1, "status": status, "text_sha256": sha,
        "title": fields["title"], "trigger": fields["trigger"], "instruction": fields["instruction"],
        "kind": fields["kind"], "polarity": fields["polarity"],
        "render": {"text": "", "tokens": 0, "counted_by": ""},
        "counters": {"proposals": 0, "retry_exposures": 0, "retry_successes": 0, "gate_rounds": 0},
        "gate": [], "provenance": empty_provenance(), "history": [],
        "created_round": round, "updated_round": round,
    }
    skill["render"]["text"] = skill_line(skill)
    return skill


def set_render(skill: dict, counter_name: str, count) -> bool:
    """(Re)compute a skill's line; recount its tokens only if the line or the tokenizer changed.
    Returns True when something changed."""
    line = skill_line(skill)
    r = skill["render"]
    if r["text"] == line and r["counted_by"] == counter_name and r["tokens"] > 0:
        return False
    skill["render"] = {"text": line, "tokens": int(count(line)), "counted_by": counter_name}
    return True


def header_tokens(count) -> int:
    """Tokens of the block header (render.HEADER), stored in the bank once per tokenizer."""
    return int(count(HEADER))
