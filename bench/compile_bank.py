"""Benchmark: compile 10,000 analyst proposals into a 1,000-skill bank (target < 2 s).

Prints the time of compile_bank (the pure function; inputs already loaded as dicts, as after
load_validated; estimate tokenizer), the time of canonical serialization, and the sha256
of the output over 3 runs with the candidate batches and their proposals shuffled (all three
must be equal). Synthetic data, seeded: 30% exact re-proposals of bank skills (case and
punctuation changed), 30% near duplicates (one or two words changed), 40% new texts, some of
them proposed several times.

    .venv/bin/python bench/compile_bank.py [--skills 1000] [--candidates 10000] [--runs 3]
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyhelpers.config.load import load  # noqa: E402
from pyhelpers.jsonfiles import canonical_bytes  # noqa: E402
from pyhelpers.skills.bank import empty_bank  # noqa: E402
from pyhelpers.skills.compile import CompileOptions, compile_bank  # noqa: E402

KINDS = ["search", "navigation", "inspection", "options", "price", "purchase", "other"]
STOP = ["the", "a", "to", "of", "and", "before", "when", "is", "on", "for", "with", "not", "if", "it"]


def _vocab(rng: random.Random, n: int) -> list[str]:
    syll = ["ka", "lo", "mi", "ter", "zu", "pra", "ne", "sho", "vi", "dan", "ro", "cle", "ba", "fi", "gu"]
    return sorted({"".join(rng.choice(syll) for _ in range(rng.randint(2, 4))) for _ in range(n)})


def _sentence(rng: random.Random, vocab: list[str], lo: int, hi: int) -> str:
    return " ".join(rng.choice(STOP) if rng.random() < 0.35 else vocab[min(int(rng.paretovariate(1.1)) - 1, len(vocab) - 1)
                                                                       if rng.random() < 0.3 else rng.randrange(len(vocab))]
                    for _ in range(rng.randint(lo, hi)))


def _proposal(rng, trigger, instruction, kind, polarity, rid):
    return {"title": f"Skill {trigger.split()[0]}"[:80], "trigger": trigger, "instruction": instruction,
            "kind": kind, "polarity": polarity, "evidence": [rid]}


def _perturb(rng: random.Random, vocab, text: str, words: int) -> str:
    toks = text.split()
    for _ in range(words):
        toks[rng.randrange(len(toks))] = rng.choice(vocab)
    return " ".join(toks)


def _batches(props: list[dict], round_: int) -> list[dict]:
    out = []
    for i in range(0, len(props), 16):
        chunk = props[i:i + 16]
        rids = sorted({e for p in chunk for e in p["evidence"]})
        bid = hashlib.sha256("\n".join(rids).encode()).hexdigest()[:16]
        out.append({"schema_version": 1, "batch_id": bid, "round": round_, "record_ids": rids,
                    "analyst_model": "qwen-plus", "prompt_hash": "0" * 64, "status": "ok", "reason": None,
                    "proposals": chunk})
    return out


def options() -> CompileOptions:
    """The compile of a run with this checkout's configuration (env/defaults.env < .env)."""
    cfg = load()
    return CompileOptions(dup_jaccard=cfg.SKILL_DUP_JACCARD, max_skill_tokens=cfg.SKILL_MAX_TOKENS)


def make_inputs(n_skills: int, n_cands: int, seed: int = 7) -> tuple[dict, list[dict]]:
    rng = random.Random(seed)
    vocab = _vocab(rng, 4000)
    base = [(_sentence(rng, vocab, 6, 14), _sentence(rng, vocab, 12, 28), rng.choice(KINDS),
             "do" if rng.random() < 0.7 else "avoid") for _ in range(n_skills)]
    seed_props = [_proposal(rng, t, i, k, p, f"r0-s0-g0-i{j}") for j, (t, i, k, p) in enumerate(base)]
    bank = compile_bank(empty_bank(0), _batches(seed_props, 0), 0, options())
    statuses = ["active"] * 2 + ["probation"] * 2 + ["candidate"] * 5 + ["retired"]
    for s in bank["skills"]:
        s["status"] = rng.choice(statuses)
    bank["round"] = 1
    new_pool = [(_sentence(rng, vocab, 6, 14), _sentence(rng, vocab, 12, 28), rng.choice(KINDS), "do")
                for _ in range(n_cands // 4)]
    props = []
    for j in range(n_cands):
        rid = f"r1-s{j % 20}-g{j % 7}-i{j}"
        r = rng.random()
        t, i, k, p = rng.choice(base) if r < 0.6 else rng.choice(new_pool)
        if r < 0.3:
            t, i = t.upper() + "!", i.capitalize() + "."
        elif r < 0.6 or rng.random() < 0.3:
            t, i = _perturb(rng, vocab, t, rng.randint(0, 1)), _perturb(rng, vocab, i, rng.randint(1, 2))
        props.append(_proposal(rng, t, i, k, p, rid))
    return bank, _batches(props, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skills", type=int, default=1000)
    ap.add_argument("--candidates", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    bank, batches = make_inputs(args.skills, args.candidates)
    print(f"inputs: bank of {len(bank['skills'])} skills, {sum(len(b['proposals']) for b in batches)} proposals "
          f"in {len(batches)} batches")
    rng, opts = random.Random(99), options()
    for run in range(args.runs):
        shuffled = [dict(b, proposals=rng.sample(b["proposals"], len(b["proposals"]))) for b in batches]
        rng.shuffle(shuffled)
        t0 = time.perf_counter()
        out = compile_bank(bank, shuffled, 1, opts)
        t1 = time.perf_counter()
        data = canonical_bytes(out)
        t2 = time.perf_counter()
        counts = {}
        for s in out["skills"]:
            counts[s["status"]] = counts.get(s["status"], 0) + 1
        print(f"run {run + 1}: compile {t1 - t0:.3f} s, serialize {t2 - t1:.3f} s, {len(out['skills'])} skills "
              f"{dict(sorted(counts.items()))}, sha256 {hashlib.sha256(data).hexdigest()}")


if __name__ == "__main__":
    main()
