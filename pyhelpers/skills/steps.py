"""The SkillBank's two steps of a round, from files to files: compile (the round's analyst
candidates into the bank) and inject (the gate's decisions into the next round's bank).
`pyhelpers skillbank compile|inject` and the training loop both call these; they only read and
write the files they are given (atomically), and return the old and new banks for a summary."""

from __future__ import annotations

from pathlib import Path

from pyhelpers import jsonfiles
from pyhelpers.errors import ToolkitError
from pyhelpers.skills.bank import bank_sha256, load_bank, status_line
from pyhelpers.skills.compile import CompileOptions, compile_bank
from pyhelpers.skills.decisions import Caps, apply_decisions
from pyhelpers.skills.report import diff_banks
from pyhelpers.skills.tokens import counter_for


def json_files(directory: Path, what: str) -> list[Path]:
    if not directory.is_dir():
        raise ToolkitError(f"{what} directory not found", str(directory),
                           "check the path (create it empty if there is nothing to read)")
    return sorted(directory.glob("*.json"))


def compile_step(bank_path: Path, *, cand_dir: Path, round_: int | None, hf_dir: Path | None, spool_dir: Path | None,
                 dup_jaccard: float, max_skill_tokens: int, embedder=None) -> tuple[dict, dict, int]:
    """(old bank, compiled bank, number of candidate files); nothing written."""
    if not 0 < dup_jaccard <= 1 or max_skill_tokens < 1:
        raise ToolkitError("SKILL_DUP_JACCARD must be in (0, 1] and SKILL_MAX_TOKENS at least 1",
                           f"SKILL_DUP_JACCARD={dup_jaccard}, SKILL_MAX_TOKENS={max_skill_tokens}", "fix them in .env")
    bank = load_bank(bank_path)
    name, count = counter_for(hf_dir)
    options = CompileOptions(dup_jaccard=dup_jaccard, max_skill_tokens=max_skill_tokens,
                             tokenizer_name=name, count_tokens=count, embedder=embedder)
    spool = [jsonfiles.load_validated(p, "spool") for p in json_files(spool_dir, "spool")] if spool_dir else []
    files = json_files(cand_dir, "candidates")
    new = compile_bank(bank, files, round=bank["round"] if round_ is None else round_, options=options, retry_records=spool)
    return bank, new, len(files)


def inject_step(compiled_path: Path, *, decisions_path: Path | None, round_: int | None, caps: Caps) -> tuple[dict, dict]:
    """(compiled bank, next round's bank); nothing written."""
    compiled = load_bank(compiled_path)
    round_ = compiled["round"] if round_ is None else round_
    decisions = {}
    if decisions_path:
        doc = jsonfiles.load_validated(decisions_path, "gate_decisions")
        if doc["round"] != round_:
            raise ToolkitError(f"decisions are for round {doc['round']}, not {round_}", str(decisions_path),
                               "pass the gate decisions of the round being injected")
        if doc["bank_sha256"] and doc["bank_sha256"] != bank_sha256(compiled):
            raise ToolkitError("decisions were computed for another bank (bank_sha256 differs)", str(decisions_path),
                               f"re-run the gate on {compiled_path}")
        decisions = doc["decisions"]
    return compiled, apply_decisions(compiled, decisions, round=round_, caps=caps)


def caps_from(cfg) -> Caps:
    return Caps(max_active=cfg.BANK_MAX_ACTIVE, token_budget=cfg.SKILL_TOKEN_BUDGET,
                max_gate_rounds=cfg.GATE_MAX_ROUNDS)


def change_summary(old: dict, new: dict, *, out: Path, sha: str, label: str | None = None) -> str:
    """One line: the new bank's skills by status, what changed, where it was written. `label`
    names the bank (default "round N", the round it is injected into; the final bank is injected
    into no round, so its writer names it)."""
    d = diff_banks(old, new)
    return (f"{label or 'round ' + str(new['round'])}: {len(new['skills'])} skills ({status_line(new)}); {len(d['added'])} added, "
            f"{len(d['status_changes'])} status changes; tokens by {new['tokenizer']['name']}; "
            f"{out} sha256 {sha}")
