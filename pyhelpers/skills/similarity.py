"""Near-duplicate search for compile: a lexical index (default) and an optional embedding index.

Both follow one small interface: ``prepare(texts)`` once with every text of this compile
(ref -> (trigger, instruction)), then ``add(ref, is_bank)`` for each leader and ``best(ref)``
for each newcomer. ``best`` returns the most similar leader at or above the threshold, ties
broken by: bank skills before this round's newcomers, then the smaller ref. Results depend only
on the set of texts and the order of add/best calls, which compile fixes canonically.

Lexical (default): Jaccard similarity of the word unigram+bigram sets (text.features). Threshold
0.7 (SKILL_DUP_JACCARD) merges texts that differ in about 10% of their words or less. Measured on
random texts (trigger + instruction; skills run 20-40 words): one word replaced in 10 scores 0.75,
2 in 20 scores 0.74, 3 in 40 scores 0.80 (merged: rewordings); 2 in 10 scores 0.56, 3 in 20
scores 0.65 (kept apart: a different skill, or a variant worth gating). Bigrams make word order
count, so a shuffled text is not a duplicate. Similarity alone cannot see negation ("click buy
now" vs "do not click buy now" scores 0.86 on a 16-word text), so both indexes also require
the same negation words (text.negations). Opposite polarities are never compared (compile keeps
one index per polarity).

Speed: exact prefix filtering (Chaudhuri et al. 2006; Bayardo et al. "All-Pairs", 2007). Features
are ordered rarest first by document frequency over the prepared texts; a set of size n is indexed
and probed only under its first n - ceil(t*n) + 1 features, which provably share a feature with
any set of Jaccard >= t. So no O(n*m) pairwise pass, and no missed pair (unlike MinHash).

Embedding (optional, ``--embedder module:factory``): cosine of L2-normalised vectors from a
caller-supplied Embedder (name + embed(list[str]) -> vectors), threshold CompileOptions.dup_cosine
(0.92, a starting point: cosine scales differ by model, calibrate it); brute force with numpy (fine for thousands of skills). The project ships
no model and downloads nothing.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Protocol

from pyhelpers.skills.text import features, negations

_EPS = 1e-9


class Embedder(Protocol):
    """What an embedding backend provides: a stable name (recorded in the bank) and vectors."""

    name: str

    def embed(self, texts: list[str]) -> Sequence[Sequence[float]]: ...


def _pick(found: list[tuple[float, bool, str]]) -> tuple[float, str] | None:
    if not found:
        return None
    score, _, ref = min(found, key=lambda f: (-f[0], not f[1], f[2]))
    return score, ref


class LexicalIndex:
    """Jaccard >= threshold over text.features, with prefix filtering (see module doc)."""

    def __init__(self, threshold: float):
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"lexical threshold must be in (0, 1], got {threshold}")
        self.name = "lexical-jaccard-uni+bigram"
        self.threshold = threshold
        self._sorted: dict[str, tuple[str, ...]] = {}
        self._sets: dict[str, frozenset[str]] = {}
        self._neg: dict[str, frozenset[str]] = {}
        self._postings: dict[str, list[tuple[str, bool]]] = defaultdict(list)

    def prepare(self, texts: Mapping[str, tuple[str, str]]) -> None:
        sets = {ref: features(trig, instr) for ref, (trig, instr) in texts.items()}
        self._neg = {ref: negations(f) for ref, f in sets.items()}
        df = Counter(f for s in sets.values() for f in s)
        self._sets = sets
        self._sorted = {ref: tuple(sorted(s, key=lambda f: (df[f], f))) for ref, s in sets.items()}

    def _prefix(self, ref: str) -> tuple[str, ...]:
        feats = self._sorted[ref]
        n = len(feats)
        return feats[: n - math.ceil(self.threshold * n - _EPS) + 1] if n else ()

    def add(self, ref: str, is_bank: bool) -> None:
        for f in self._prefix(ref):
            self._postings[f].append((ref, is_bank))

    def best(self, ref: str) -> tuple[float, str] | None:
        a = self._sets[ref]
        if not a:
            return None
        t, n = self.threshold, len(a)
        lo, hi = t * n - _EPS, n / t + _EPS
        seen: set[str] = set()
        found = []
        for f in self._prefix(ref):
            for other, is_bank in self._postings.get(f, ()):
                if other in seen:
                    continue
                seen.add(other)
                b = self._sets[other]
                if not lo <= len(b) <= hi or self._neg[other] != self._neg[ref]:
                    continue
                inter = len(a & b)
                union = n + len(b) - inter
                if inter >= t * union - _EPS:
                    found.append((round(inter / union, 9), is_bank, other))
        return _pick(found)


class EmbeddingIndex:
    """Cosine >= threshold of the embedder's vectors, brute force (numpy)."""

    def __init__(self, embedder: Embedder, threshold: float):
        self.name = f"embedding:{embedder.name}"
        self.threshold = threshold
        self._embedder = embedder
        self._vecs: dict = {}
        self._neg: dict[str, frozenset[str]] = {}
        self._refs: list[tuple[str, bool]] = []
        self._rows: list = []

    def prepare(self, texts: Mapping[str, tuple[str, str]]) -> None:
        import numpy as np  # heavy: numpy (~0.1 s), only for embeddings

        refs = sorted(texts)
        if not refs:
            return
        raw = np.asarray(self._embedder.embed([f"{texts[r][0]}. {texts[r][1]}" for r in refs]), dtype=np.float64)
        norms = np.linalg.norm(raw, axis=1, keepdims=True)
        unit = raw / np.where(norms == 0, 1.0, norms)
        self._vecs = {r: unit[i] for i, r in enumerate(refs)}
        self._neg = {r: negations(features(*texts[r])) for r in refs}

    def add(self, ref: str, is_bank: bool) -> None:
        self._refs.append((ref, is_bank))
        self._rows.append(self._vecs[ref])

    def best(self, ref: str) -> tuple[float, str] | None:
        import numpy as np  # heavy: numpy (~0.1 s), only for embeddings

        if not self._rows:
            return None
        sims = np.asarray(self._rows) @ self._vecs[ref]
        found = [(round(float(s), 6), b, r) for s, (r, b) in zip(sims, self._refs, strict=False)
                 if round(float(s), 6) >= self.threshold and self._neg[r] == self._neg[ref]]
        return _pick(found)
