"""Text rules of the SkillBank: normalization, content ids, lexical features, token estimate.

Stdlib only (the rollout plugin imports ``render``, which imports this module).

normalize(s): Unicode NFKC -> casefold -> every character that is not a letter, digit or
whitespace (punctuation, symbols, '_') becomes a space -> whitespace collapsed -> stripped.
Digits are kept, so "under $50" and "under 50" are equal but "under 40" differs.

text_sha256(trigger, instruction) = sha256(normalize(trigger) + "\\n" + normalize(instruction));
skill id = "sk-" + its first 12 hex digits, fixed when the skill is created (an edit bumps
``version`` and ``text_sha256``, never the id).
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata

_NON_WORD = re.compile(r"[^\w\s]|_")
_SPACES = re.compile(r"\s+")
# CJK ideographs, kana, hangul, CJK punctuation and full-width forms: about one token each.
_CJK = re.compile(r"[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")
ESTIMATE_NAME = "estimate-v1"
CHARS_PER_TOKEN = 4


def clean(s: str) -> str:
    """Cosmetic cleanup kept in the stored wording: whitespace (incl. newlines) collapsed, stripped."""
    return _SPACES.sub(" ", s).strip()


def normalize(s: str) -> str:
    """The comparison form of a text (see the module docstring)."""
    s = unicodedata.normalize("NFKC", s).casefold()
    return _SPACES.sub(" ", _NON_WORD.sub(" ", s)).strip()


def text_sha256(trigger: str, instruction: str) -> str:
    """Content hash of a skill's normalized trigger + instruction (64 hex)."""
    key = normalize(trigger) + "\n" + normalize(instruction)
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def skill_id(sha: str) -> str:
    """The id a skill gets at creation from its text hash."""
    return "sk-" + sha[:12]


def features(trigger: str, instruction: str) -> frozenset[str]:
    """Lexical features for near-duplicate search: the word unigrams and word bigrams of the
    normalized trigger and instruction (CJK characters count as words). Stop words and negations
    are kept on purpose: "check the size" and "do not check the size" must stay apart."""
    out: set[str] = set()
    for part in (trigger, instruction):
        words = _CJK.sub(lambda m: f" {m.group(0)} ", normalize(part)).split()
        out.update(words)
        out.update(f"{a} {b}" for a, b in zip(words, words[1:], strict=False))
    return frozenset(out)


_NEGATIONS = frozenset({"not", "no", "never", "without", "nor", "cannot", "avoid", "dont", "doesnt", "didnt",
                        "isnt", "arent", "cant", "wont", "shouldnt", "neither"})
_NEGATIONS |= {f"{stem} t" for stem in ("don", "doesn", "didn", "isn", "aren", "wasn", "weren", "can", "won",
                                        "shouldn", "couldn", "wouldn", "haven", "hasn", "mustn")}


def negations(feats: frozenset[str]) -> frozenset[str]:
    """The negation words among a text's features ("not", "never", "don t" from "don't" ...).
    Near-duplicate merging requires equal sets: "click buy now" and "do not click buy now"
    share most words but say opposite things."""
    return feats & _NEGATIONS


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a & b| / |a | b| (0.0 for two empty sets)."""
    if not a and not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def estimate_tokens(text: str) -> int:
    """Token estimate used when no policy tokenizer is given ("estimate-v1"): each CJK
    character counts 1, the remaining characters count 1 per CHARS_PER_TOKEN (4, the usual
    English BPE rate), rounded up. Empty text is 0 tokens."""
    cjk = len(_CJK.findall(text))
    return cjk + math.ceil((len(text) - cjk) / CHARS_PER_TOKEN)
