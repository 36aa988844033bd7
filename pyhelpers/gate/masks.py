"""Hash-seeded mask bits for the gate (stdlib only).

bit(seed, round, pair, skill) = 1 when u < keep_prob, where u is the first 64 bits of
sha256("{seed}|{round}|{pair}|{skill_id}") read as a fraction of 2**64. A bit depends on its own
four fields only: not on worker scheduling, not on the order of the skills, and adding or
removing a skill leaves every other skill's bits unchanged (skillbank.md "Masks"). The
complement of a mask (the foldover) shows exactly the gated skills the mask hides.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable

KEEP_PROB = 0.5  # the foldover design needs q = 0.5: the complement is then drawn from the same law


# A plan asks the same task's and pair's numbers many times (the gate's simulations, 100 plans of one
# seed). typed: 1 and 1.0 hash alike but print apart.
@functools.lru_cache(maxsize=1 << 16, typed=True)
def uniform(*fields: object) -> float:
    """A deterministic number in [0, 1) from the fields joined by '|'."""
    digest = hashlib.sha256("|".join(str(f) for f in fields).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def bit(seed: int, round_no: int, pair: int | str, skill_id: str, keep_prob: float = KEEP_PROB) -> bool:
    """Whether skill_id is shown in the mask episode of this pair."""
    return uniform(seed, round_no, pair, skill_id) < keep_prob


def mask(seed: int, round_no: int, pair: int | str, skill_ids: Iterable[str],
         keep_prob: float = KEEP_PROB) -> list[str]:
    """The shown skills of a pair's mask episode, sorted."""
    return sorted(s for s in set(skill_ids) if bit(seed, round_no, pair=pair, skill_id=s, keep_prob=keep_prob))


def complement(shown: Iterable[str], skill_ids: Iterable[str]) -> list[str]:
    """The foldover: the gated skills the mask does not show, sorted."""
    hidden = set(shown)
    return sorted(s for s in set(skill_ids) if s not in hidden)
