"""Skill rendering and token counting (issue 3, deliverable 3)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.knobs import compile_options
from support.skillbank import bank_of, batch, prop, sid, write_batches

from pyhelpers.skills.bank import load_bank
from pyhelpers.skills.compile import compile_bank
from pyhelpers.skills.render import HEADER, render
from pyhelpers.skills.text import estimate_tokens
from pyhelpers.skills.tokens import hf_counter

TEXTS = [("the task names a size", "click the size option first"),          # 0 active
         ("the page shows a price above the budget", "go back to the results"),  # 1 probation
         ("a search returns nothing", "search again with fewer words"),     # 2 candidate
         ("an item lacks the colour", "open the next result instead"),      # 3 candidate
         ("the cart is empty", "never click checkout"),                     # 4 retired
         ("always", "buy the first item you see on the page")]              # 5 rejected
STATUSES = ["active", "probation", "candidate", "candidate", "retired", "rejected"]


def _bank():
    bank = bank_of(TEXTS, STATUSES)
    by = {s["id"]: s for s in bank["skills"]}
    by[sid(*TEXTS[3])]["counters"]["proposals"] = 5   # outranks TEXTS[2] (1 proposal)
    by[sid(*TEXTS[0])]["kind"] = "search"             # renders first by kind order
    return bank


def _ids(*idx):
    return [sid(*TEXTS[i]) for i in idx]


def test_token_estimate_rule():
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1 and estimate_tokens("abcde") == 2
    assert estimate_tokens("尺码") == 2                     # CJK: one token per character
    assert estimate_tokens("选择尺码 size") == 4 + 2         # 4 CJK + ceil(5 / 4)


def test_views_select_statuses():
    bank = _bank()
    assert sorted(render(bank, "active", 10_000).skill_ids) == sorted(_ids(0))
    assert sorted(render(bank, "full", 10_000).skill_ids) == sorted(_ids(0, 1, 2, 3))
    masked = render(bank, "masked", 10_000, mask=_ids(2, 4))
    assert sorted(masked.skill_ids) == sorted(_ids(2, 4)) and masked.dropped == ()
    with pytest.raises(ValueError, match="not in the bank"):
        render(bank, "masked", 10_000, mask=["sk-000000000000"])
    with pytest.raises(ValueError, match="unknown view"):
        render(bank, "everything", 10_000)


def test_text_has_ids_in_canonical_order_and_tokens_add_up():
    bank = _bank()
    r = render(bank, "full", 10_000)
    assert r.text.startswith(HEADER)
    lines = r.text[len(HEADER):].splitlines()
    assert [line[1:16] for line in lines] == list(r.skill_ids)
    assert r.skill_ids[0] == sid(*TEXTS[0])                               # kind "search" first
    assert r.skill_ids[1:] == tuple(sorted(_ids(1, 2, 3)))                # then kind "options", by id
    by = {s["id"]: s for s in bank["skills"]}
    assert r.tokens == bank["tokenizer"]["header_tokens"] + sum(by[i]["render"]["tokens"] for i in r.skill_ids)
    whole = estimate_tokens(r.text)  # per-line rounding up: at most one token more per line
    assert whole <= r.tokens <= whole + len(r.skill_ids) + 1


def test_budget_drops_by_priority_and_reports_it():
    bank = _bank()
    by = {s["id"]: s for s in bank["skills"]}
    cost = {i: by[i]["render"]["tokens"] for i in by}
    head = bank["tokenizer"]["header_tokens"]
    budget = head + cost[_ids(0)[0]] + cost[_ids(1)[0]] + cost[_ids(3)[0]]
    r = render(bank, "full", budget)
    # priority: active, probation, then candidates by proposals (TEXTS[3] has 5, TEXTS[2] has 1)
    assert set(r.skill_ids) == set(_ids(0, 1, 3)) and r.dropped == tuple(_ids(2))
    assert r.tokens <= budget
    # first fit: the probation skill is dropped when it alone does not fit, smaller ones still go in
    by[_ids(1)[0]]["render"]["tokens"] = 10_000
    r = render(bank, "full", budget)
    assert r.dropped[0] == _ids(1)[0] and _ids(0)[0] in r.skill_ids
    nothing = render(bank, "full", head)
    assert (nothing.text, nothing.skill_ids, nothing.tokens) == ("", (), 0) and len(nothing.dropped) == 4


def test_render_imports_only_the_standard_library():
    code = ("import sys, pyhelpers.skills.render as r; "
            "heavy = [m for m in ('click', 'jsonschema', 'wandb', 'tokenizers', 'transformers', 'numpy', 'dotenv') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _tiny_tokenizer(directory):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(["click the size option first", "the task names a size", "skills from earlier"],
                            trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    directory.mkdir()
    tok.save(str(directory / "tokenizer.json"))
    return tok


def test_policy_tokenizer_is_used_when_hf_dir_is_given(tmp_path, toolkit_env):
    from click.testing import CliRunner

    from pyhelpers.cli import main

    tok = _tiny_tokenizer(tmp_path / "hf")
    name, count = hf_counter(tmp_path / "hf")
    assert name.startswith("hf-tokenizer:") and count("the size") == 2
    cands = write_batches(tmp_path / "cands", [batch([prop(*TEXTS[0])])])
    runner = CliRunner()
    res = runner.invoke(main, ["skillbank", "init", "--out", str(tmp_path / "b0.json")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["skillbank", "compile", "--bank", str(tmp_path / "b0.json"), "--candidates",
                               str(cands), "--out", str(tmp_path / "c.json"), "--hf-dir", str(tmp_path / "hf")])
    assert res.exit_code == 0, res.output
    bank = load_bank(tmp_path / "c.json")
    (s,) = bank["skills"]
    assert s["render"]["counted_by"] == bank["tokenizer"]["name"] == name
    assert s["render"]["tokens"] == len(tok.encode(s["render"]["text"], add_special_tokens=False).ids)
    assert s["render"]["tokens"] != estimate_tokens(s["render"]["text"])
    assert bank["tokenizer"]["header_tokens"] == len(tok.encode(HEADER, add_special_tokens=False).ids)
    # a later compile without the tokenizer recounts everything with the estimate
    again = compile_bank(bank, [], 0, compile_options())
    assert again["skills"][0]["render"] == {"text": s["render"]["text"], "counted_by": "estimate-v1",
                                            "tokens": estimate_tokens(s["render"]["text"])}


def test_bad_hf_dir_is_a_clean_error(tmp_path, toolkit_env):
    from click.testing import CliRunner

    from pyhelpers.cli import main

    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "tokenizer.json").write_text(json.dumps({"not": "a tokenizer"}))
    res = CliRunner().invoke(main, ["skillbank", "init", "--out", str(tmp_path / "b.json"),
                                    "--hf-dir", str(tmp_path / "hf")])
    assert res.exit_code == 1 and "cannot load tokenizer" in res.output and "Traceback" not in res.output
