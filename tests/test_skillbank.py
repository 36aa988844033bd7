"""SkillBank schemas and deterministic compile (issue 3, deliverables 1-2)."""

from __future__ import annotations

import hashlib
import json
import random

import pytest
from support.knobs import compile_options
from support.skillbank import bank_of, batch, prop, sid

from pyhelpers.errors import ToolkitError
from pyhelpers.jsonfiles import canonical_bytes
from pyhelpers.skills.bank import bank_sha256, empty_bank, load_bank, write_bank
from pyhelpers.skills.compile import compile_bank
from pyhelpers.skills.similarity import LexicalIndex
from pyhelpers.skills.text import features, jaccard, negations, normalize

OPTIONS = compile_options()  # SKILL_DUP_JACCARD and SKILL_MAX_TOKENS as declared

T1 = ("the task names a size", "click the matching size option before you click buy now")
T2 = ("the results page shows no matching item", "search again with fewer words from the instruction")


def _skills(bank):
    return {s["id"]: s for s in bank["skills"]}


# ---- schemas -------------------------------------------------------------------------------

def test_bank_schema_error_names_file_json_path_and_rule(tmp_path):
    bank = bank_of([T1])
    bank["skills"][0]["status"] = "famous"
    path = tmp_path / "bank.json"
    path.write_text(json.dumps(bank))
    with pytest.raises(ToolkitError) as err:
        load_bank(path)
    msg = str(err.value)
    assert str(path) in msg and "$.skills[0].status" in msg and "rule: enum" in msg


def test_merged_skill_needs_merged_into_and_bank_must_be_sorted(tmp_path):
    bank = bank_of([T1, T2])
    bank["skills"][0]["status"] = "merged"
    with pytest.raises(ToolkitError, match=r"\$\.skills\[0\].*rule: required"):
        write_bank(tmp_path / "b.json", bank)
    bank = bank_of([T1, T2])
    bank["skills"].reverse()
    with pytest.raises(ToolkitError, match="not sorted"):
        write_bank(tmp_path / "b.json", bank)
    assert not (tmp_path / "b.json").exists()


def test_written_bank_loads_back_identically(tmp_path):
    bank = bank_of([T1, T2])
    sha = write_bank(tmp_path / "b.json", bank)
    assert load_bank(tmp_path / "b.json") == bank
    assert hashlib.sha256((tmp_path / "b.json").read_bytes()).hexdigest() == sha == bank_sha256(bank)


def test_invalid_candidate_file_is_named(tmp_path):
    bad = batch([prop(*T1)])
    bad["proposals"][0]["polarity"] = "maybe"
    f = tmp_path / "x.json"
    f.write_text(json.dumps(bad))
    with pytest.raises(ToolkitError) as err:
        compile_bank(empty_bank(), [f], 0, OPTIONS)
    assert str(f) in str(err.value) and "$.proposals[0].polarity" in str(err.value)


# ---- determinism ---------------------------------------------------------------------------

def _corpus(rng: random.Random):
    words = [f"w{i}" for i in range(60)] + ["the", "a", "to", "not", "before", "size", "price"]
    def text(n):
        return " ".join(rng.choice(words) for _ in range(n))
    base = [(text(6), text(12)) for _ in range(40)]
    bank = bank_of(base[:15], ["active", "probation", "candidate", "retired", "rejected"] * 3)
    props = []
    for j in range(400):
        t, i = rng.choice(base)
        r = rng.random()
        if r < 0.3:
            t, i = t.upper() + " !", "  " + i + "."
        elif r < 0.7:
            toks = i.split()
            toks[rng.randrange(len(toks))] = rng.choice(words)
            i = " ".join(toks)
        props.append(prop(t, i, title=rng.choice(["Size", "Price", "Search"]),
                          polarity=rng.choice(["do", "do", "avoid"]), evidence=(f"r1-s{j}-g0-i{j % 3}",)))
    batches = [batch(props[k:k + 16], round_=1) for k in range(0, len(props), 16)]
    return bank, batches


def test_twenty_input_orders_give_one_sha256():
    bank, batches = _corpus(random.Random(3))
    rng = random.Random(11)
    digests = set()
    for _ in range(20):
        order = [dict(b, proposals=rng.sample(b["proposals"], len(b["proposals"]))) for b in batches]
        rng.shuffle(order)
        digests.add(hashlib.sha256(canonical_bytes(compile_bank(bank, order, 1, OPTIONS))).hexdigest())
    assert len(digests) == 1
    out = compile_bank(bank, batches, 1, OPTIONS)
    ops = {e["op"] for s in out["skills"] for e in s["history"]}
    assert {"ADD", "UPVOTE", "MERGE", "REPROPOSED"} <= ops  # the corpus exercises every merge path


def test_compile_is_pure_and_records_parent():
    bank, batches = _corpus(random.Random(5))
    before = canonical_bytes(bank)
    out = compile_bank(bank, batches, 1, OPTIONS)
    assert canonical_bytes(bank) == before
    assert out["parent_sha256"] == hashlib.sha256(before).hexdigest()
    assert out["round"] == 1 and [s["id"] for s in out["skills"]] == sorted(s["id"] for s in out["skills"])
    assert "created_at" not in json.dumps(out)


# ---- dedup and merge -----------------------------------------------------------------------

def test_exact_dedup_ignores_case_punctuation_width_and_spaces():
    variants = [prop("The task names a SIZE.", "Click the matching size option, before you click 'Buy Now'!"),
                prop("the  task names a size", "click the matching size option before you click buy now"),
                prop("ＴＨＥ task names a size", "click   the matching size-option before you click buy now")]
    assert len({normalize(p["trigger"]) + normalize(p["instruction"]) for p in variants}) == 1
    out = compile_bank(empty_bank(), [batch([p]) for p in variants] + [batch(variants, tag="x")], 0, OPTIONS)
    (s,) = out["skills"]
    assert s["counters"]["proposals"] == 6 and s["history"] == [{"round": 0, "op": "ADD", "count": 6}]


def test_near_duplicates_merge_but_negation_polarity_and_rewrites_do_not():
    base = prop(*T1, evidence=("r0-s0-g0-i1",))
    one_word = prop(T1[0], T1[1].replace("matching", "correct"), evidence=("r0-s0-g0-i2",))
    negated = prop(T1[0], "do not " + T1[1], evidence=("r0-s0-g0-i3",))
    other_pol = prop(*T1[:1], T1[1] + " twice", polarity="avoid", evidence=("r0-s0-g0-i4",))
    rewrite = prop(T1[0], "pick the size that the instruction asks for, then buy", evidence=("r0-s0-g0-i5",))
    fa, fb = features(*T1), features(one_word["trigger"], one_word["instruction"])
    assert jaccard(fa, fb) >= 0.7 and jaccard(fa, features(negated["trigger"], negated["instruction"])) >= 0.7
    assert negations(fa) != negations(features(negated["trigger"], negated["instruction"])) == {"not"}
    assert negations(features("pick a t shirt", "don't buy")) == {"don t"}
    out = compile_bank(empty_bank(), [batch([base, base]), batch([one_word, negated, other_pol, rewrite])], 0, OPTIONS)
    skills = _skills(out)
    assert len(skills) == 4 and sid(one_word["trigger"], one_word["instruction"]) not in skills
    leader = skills[sid(*T1)]  # two proposals: it leads, the one-word variant folds into it
    assert leader["counters"]["proposals"] == 3 and leader["instruction"] == T1[1]
    assert {"round": 0, "op": "MERGE", "count": 1} in leader["history"]
    assert "r0-s0-g0-i2" in leader["provenance"]["record_ids"]


def test_existing_wording_wins_and_counts_are_credited():
    bank = bank_of([T1], ["active"])
    near = prop(T1[0], T1[1].replace("matching", "right"), title="Other title", evidence=("r1-s0-g0-i9",))
    out = compile_bank(bank, [batch([near] * 5, round_=1)], 1, OPTIONS)
    (s,) = out["skills"]
    assert (s["title"], s["instruction"], s["status"]) == ("Skill 0", T1[1], "active")
    assert s["counters"]["proposals"] == 6 and s["updated_round"] == 1
    assert s["history"][-1] == {"round": 1, "op": "MERGE", "count": 5}


def test_rejected_batches_are_ignored_and_duplicate_batch_ids_count_once():
    b = batch([prop(*T1)])
    out = compile_bank(empty_bank(), [batch([prop(*T2)], status="rejected"), b, json.loads(json.dumps(b))], 0, OPTIONS)
    (s,) = out["skills"]
    assert s["id"] == sid(*T1) and s["counters"]["proposals"] == 1
    changed = dict(b, proposals=[prop(*T2)])
    with pytest.raises(ToolkitError, match="share one batch id"):
        compile_bank(empty_bank(), [b, changed], 0, OPTIONS)


def test_reproposal_of_a_rejected_skill_is_recorded_not_revived():
    bank = bank_of([T1], ["rejected"])
    out = compile_bank(bank, [batch([prop(*T1)], round_=1), batch([prop(T1[0], T1[1] + " now")], round_=1)], 1, OPTIONS)
    (s,) = out["skills"]
    assert s["status"] == "rejected" and s["history"][-1] == {"round": 1, "op": "REPROPOSED", "count": 2}


def test_over_long_proposal_becomes_a_rejected_tombstone():
    long_text = prop(T2[0], " ".join(["carefully compare every option"] * 20))
    out = compile_bank(empty_bank(), [batch([long_text]), batch([prop(*T1)])], 0, compile_options(max_skill_tokens=60))
    by = _skills(out)
    assert by[sid(*T1)]["status"] == "candidate"
    tomb = by[sid(long_text["trigger"], long_text["instruction"])]
    assert tomb["status"] == "rejected" and "SKILL_MAX_TOKENS" in tomb["history"][-1]["note"]


def test_provenance_is_bounded_and_sorted():
    props = [prop(*T1, evidence=(f"r0-s{i:02d}-g0-i0",)) for i in range(50)]
    (s,) = compile_bank(empty_bank(), [batch(props)], 0, OPTIONS)["skills"]
    assert s["provenance"]["record_ids"] == sorted(f"r0-s{i:02d}-g0-i0" for i in range(32))
    assert s["counters"]["proposals"] == 50


def test_retry_counters_from_spool_records():
    bank = bank_of([T1, T2], ["active", "candidate"])
    a, b = sid(*T1), sid(*T2)
    def rec(i, shown, success):
        ep = {"skills_shown": shown, "turns": [], "reward": 0.0, "success": success, "termination": "done"}
        return {"id": f"r1-s0-g0-i{i}", "retry": ep}
    records = [rec(0, [a, b], True), rec(1, [a], False), rec(1, [a], False), {"id": "r1-s0-g0-i2", "retry": None}]
    by = _skills(compile_bank(bank, [], 1, OPTIONS, retry_records=records))
    assert (by[a]["counters"]["retry_exposures"], by[a]["counters"]["retry_successes"]) == (2, 1)
    assert (by[b]["counters"]["retry_exposures"], by[b]["counters"]["retry_successes"]) == (1, 1)


def test_prefix_filter_finds_exactly_what_brute_force_finds():
    rng = random.Random(1)
    words = [f"x{i}" for i in range(30)]
    texts = {f"t{k:03d}": (" ".join(rng.choices(words, k=3)), " ".join(rng.choices(words, k=rng.randint(3, 9))))
             for k in range(300)}
    for threshold in (0.3, 0.5, 0.7):
        index = LexicalIndex(threshold)
        index.prepare(texts)
        feats = {r: features(*t) for r, t in texts.items()}
        leaders = []
        for ref in sorted(texts):
            scores = [(jaccard(feats[ref], feats[o]), o) for o in leaders]
            good = [(round(s, 9), o) for s, o in scores if s >= threshold - 1e-9]
            expect = min(good, key=lambda g: (-g[0], g[1])) if good else None
            assert index.best(ref) == expect
            if expect is None:
                index.add(ref, False)
                leaders.append(ref)


class _LetterEmbedder:
    """A toy embedding: letter counts (stands in for a real model behind the interface)."""
    name = "letters-v0"

    def embed(self, texts):
        return [[t.count(c) for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts]


def test_optional_embedding_backend_merges_by_cosine():
    anagram = prop(" ".join(reversed(T1[0].split())), " ".join(reversed(T1[1].split())))
    opts = compile_options(embedder=_LetterEmbedder(), dup_cosine=0.99)
    out = compile_bank(empty_bank(), [batch([prop(*T1), prop(*T1)]), batch([anagram])], 0, opts)
    (s,) = out["skills"]
    assert s["counters"]["proposals"] == 3
    assert out["config"]["compile"]["similarity"] == "embedding:letters-v0"
    lexical = compile_bank(empty_bank(), [batch([prop(*T1), prop(*T1)]), batch([anagram])], 0, OPTIONS)
    assert len(lexical["skills"]) == 2
