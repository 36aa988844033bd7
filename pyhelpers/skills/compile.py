"""Deterministic compile: fold one round's analyst candidates into the bank (skillbank.md step 3).

compile_bank is pure (no clock, network or globals; the token counter and embedder are passed
in) and order-independent: every step works on sets keyed by content hashes, and the one
order-dependent step (greedy near-duplicate clustering) runs in a canonical order.

1. Refresh: every skill's line is re-rendered; its tokens are recounted only if the line or the
   tokenizer changed.
2. Inputs: batches with status "rejected" are skipped; a batch id given twice counts once (two
   different contents under one batch id is an error). Wording is whitespace-collapsed.
3. Exact dedup: proposals with the same text_sha256 (normalized trigger + instruction) form one
   group; its wording is the smallest (title, trigger, instruction, kind, polarity) tuple, its
   proposal count the group size, its provenance the bounded union.
4. Exact match with the bank (same text_sha256, or the id this text would get already exists):
   the bank skill is credited (following merged_into) -- existing wording wins.
5. Length cap: a new group whose line exceeds max_skill_tokens becomes a "rejected" tombstone
   (so its re-proposals are recognised) and never absorbs others.
6. Near duplicates, per polarity: leaders are the bank's skills (all statuses except merged);
   new groups are visited by (more proposals first, text_sha256). Each is folded into its most
   similar leader at or above the threshold (similarity.py: ties -> bank skills, then smaller
   ref); otherwise it becomes a new "candidate" skill and a leader for the groups after it.
7. Credit: proposals and provenance are added; one history event per skill and op per round
   (UPVOTE exact, MERGE near, REPROPOSED when the target is rejected/retired: tombstones are
   never revived by compile; only the gate changes status).
8. Retry counters from this round's spool records (each record id once): every skill shown in a
   record's retry gets one exposure, and one success if the retry succeeded.
9. Output: round, parent_sha256 = sha256 of the input bank, config.compile, tokenizer, skills
   sorted by id.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pyhelpers import jsonfiles
from pyhelpers.errors import ToolkitError
from pyhelpers.skills.bank import (
    add_event,
    bank_sha256,
    copy_bank,
    empty_provenance,
    header_tokens,
    merge_provenance,
    new_skill,
    set_render,
)
from pyhelpers.skills.similarity import Embedder, EmbeddingIndex, LexicalIndex
from pyhelpers.skills.text import ESTIMATE_NAME, clean, estimate_tokens, skill_id, text_sha256

OPS = ("UPVOTE", "MERGE", "REPROPOSED")
TOMBSTONES = ("rejected", "retired")


@dataclass(frozen=True)
class CompileOptions:
    """Knob values and backends of one compile (recorded in bank.config.compile). The knobs have no
    default here: the caller passes the resolved ones (skills sit below config/)."""

    dup_jaccard: float                           # SKILL_DUP_JACCARD
    max_skill_tokens: int                        # SKILL_MAX_TOKENS
    tokenizer_name: str = ESTIMATE_NAME
    count_tokens: Callable[[str], int] = field(default=estimate_tokens, compare=False)
    embedder: Embedder | None = field(default=None, compare=False)
    dup_cosine: float = 0.92                     # used only with an embedder

    def index(self):
        if self.embedder is not None:
            return EmbeddingIndex(self.embedder, self.dup_cosine)
        return LexicalIndex(self.dup_jaccard)

    def record(self) -> dict:
        rec = {"similarity": self.index().name, "max_skill_tokens": self.max_skill_tokens,
               "tokenizer": self.tokenizer_name}
        if self.embedder is not None:
            rec["dup_cosine"] = self.dup_cosine
        else:
            rec["dup_jaccard"] = self.dup_jaccard
        return rec


def _batches(candidates: Iterable[Path | str | Mapping]) -> list[Mapping]:
    """Load the batches (paths: validated against candidates.schema.json; dicts: taken as
    already validated, e.g. by jsonfiles.load_validated); skip rejected ones; one per batch id."""
    by_id: dict[str, Mapping] = {}
    for c in candidates:
        if isinstance(c, (str, Path)):
            doc, where = jsonfiles.load_validated(Path(c), "candidates"), str(c)
        else:
            doc, where = c, "input"
        seen = by_id.get(doc["batch_id"])
        if seen is not None and json.dumps(seen, sort_keys=True) != json.dumps(doc, sort_keys=True):
            raise ToolkitError("two different candidate files share one batch id",
                               f"batch {doc['batch_id']} ({where})", "remove the stale copy")
        by_id[doc["batch_id"]] = doc
    return [doc for doc in by_id.values() if doc["status"] == "ok"]


def _groups(batches: list[Mapping]) -> dict[str, dict]:
    """Exact-dedup groups keyed by text_sha256 (step 3)."""
    items: dict[str, list] = defaultdict(list)
    for b in batches:
        meta = {"batch_ids": [b["batch_id"]], "analyst_models": [b["analyst_model"]],
                "prompt_hashes": [b["prompt_hash"]]}
        for p in b["proposals"]:
            f = {"title": clean(p["title"]), "trigger": clean(p["trigger"]),
                 "instruction": clean(p["instruction"]), "kind": p["kind"], "polarity": p["polarity"]}
            items[text_sha256(f["trigger"], f["instruction"])].append((f, p["evidence"], meta))
    groups = {}
    for sha, group in items.items():
        order = ("title", "trigger", "instruction", "kind", "polarity")
        fields = min((g[0] for g in group), key=lambda f: tuple(f[k] for k in order))
        prov = empty_provenance()
        for _, evidence, meta in group:
            merge_provenance(prov, {"record_ids": evidence, **meta})
        groups[sha] = {"fields": fields, "n": len(group), "prov": prov}
    return groups


def _resolve(skills: Mapping[str, dict], sid: str) -> str:
    for _ in range(len(skills) + 1):  # follow merged_into; a cycle cannot loop forever
        nxt = skills[sid].get("merged_into")
        if skills[sid]["status"] != "merged" or not nxt:
            return sid
        sid = nxt
    raise ToolkitError("merged_into forms a cycle", sid, "fix the bank by hand")


def compile_bank(bank: Mapping, candidates: Iterable[Path | str | Mapping], round: int,
                 options: CompileOptions, retry_records: Iterable[Mapping] = ()) -> dict:
    """The bank after folding `candidates` (batch files or dicts) in, as of `round`."""
    out = copy_bank(bank)
    name, count = options.tokenizer_name, options.count_tokens
    skills: dict[str, dict] = {s["id"]: s for s in out["skills"]}
    for s in skills.values():
        set_render(s, name, count)
    groups = _groups(_batches(candidates))

    credit: dict[str, Counter] = defaultdict(Counter)

    def fold(target: str, g: dict, op: str) -> None:
        s = skills[target]
        s["counters"]["proposals"] += g["n"]
        merge_provenance(s["provenance"], g["prov"])
        credit[target]["REPROPOSED" if s["status"] in TOMBSTONES else op] += g["n"]

    by_sha = {s["text_sha256"]: sid for sid, s in skills.items()}
    new: dict[str, dict] = {}
    for sha in sorted(groups):
        target = by_sha.get(sha) or (skill_id(sha) if skill_id(sha) in skills else None)
        if target:
            fold(_resolve(skills, target), groups[sha], "UPVOTE")
            continue
        s = new_skill(skill_id(sha), sha, fields=groups[sha]["fields"], round=round)
        set_render(s, name, count)
        if s["render"]["tokens"] > options.max_skill_tokens:
            s["status"] = "rejected"
            s["counters"]["proposals"] = groups[sha]["n"]
            s["provenance"] = groups[sha]["prov"]
            add_event(s, round, op="ADD", count=groups[sha]["n"])
            add_event(s, round, "REJECT", note=f"over SKILL_MAX_TOKENS ({s['render']['tokens']} tokens)")
            skills[s["id"]] = s
            continue
        new[sha] = s

    for polarity in ("avoid", "do"):
        leaders = sorted(sid for sid, s in skills.items()
                         if s["polarity"] == polarity and s["status"] != "merged")
        fresh = sorted((sha for sha, s in new.items() if s["polarity"] == polarity),
                       key=lambda sha: (-groups[sha]["n"], sha))
        index = options.index()
        texts = {sid: (skills[sid]["trigger"], skills[sid]["instruction"]) for sid in leaders}
        texts.update({sha: (new[sha]["trigger"], new[sha]["instruction"]) for sha in fresh})
        index.prepare(texts)
        for sid in leaders:
            index.add(sid, True)
        for sha in fresh:
            hit = index.best(sha)
            if hit is not None:
                ref = hit[1]
                fold(ref if ref in skills else new[ref]["id"], groups[sha], "MERGE")
                continue
            s = new[sha]
            s["counters"]["proposals"] = groups[sha]["n"]
            s["provenance"] = groups[sha]["prov"]
            add_event(s, round, op="ADD", count=groups[sha]["n"])
            skills[s["id"]] = s
            index.add(sha, False)

    for sid in sorted(credit):
        for op in OPS:
            if credit[sid][op]:
                add_event(skills[sid], round, op=op, count=credit[sid][op])
        skills[sid]["updated_round"] = round

    seen_records: set[str] = set()
    for rec in retry_records:
        retry = rec.get("retry")
        if rec["id"] in seen_records or not retry:
            continue
        seen_records.add(rec["id"])
        for sid in sorted(set(retry["skills_shown"])):
            if sid in skills:
                skills[sid]["counters"]["retry_exposures"] += 1
                skills[sid]["counters"]["retry_successes"] += int(bool(retry["success"]))
                skills[sid]["updated_round"] = round

    out["round"] = round
    out["parent_sha256"] = bank_sha256(bank)
    out["tokenizer"] = {"name": name, "header_tokens": header_tokens(count)}
    out["config"] = {**out.get("config", {}), "compile": options.record()}
    out["skills"] = [skills[sid] for sid in sorted(skills)]
    return out
