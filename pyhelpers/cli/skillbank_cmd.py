"""`pyhelpers skillbank init|compile|inject|show|diff|render|select` (thin: parse, call, echo)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import click

from pyhelpers.config import load
from pyhelpers.errors import ToolkitError
from pyhelpers.skills import steps
from pyhelpers.skills.bank import bank_sha256, check_bank, empty_bank, header_tokens, load_bank, write_bank
from pyhelpers.skills.decisions import select_for_gate
from pyhelpers.skills.render import render
from pyhelpers.skills.report import diff_banks, format_diff, format_show, show_rows
from pyhelpers.skills.tokens import counter_for


def _embedder(spec: str | None):
    if not spec:
        return None
    module, _, attr = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), attr or "embedder")()
    except (ImportError, AttributeError) as exc:
        raise ToolkitError(f"cannot load embedder ({exc})", f"--embedder {spec}",
                           "give module:factory of an installed module; the factory returns an Embedder") from None


@click.group()
def skillbank():
    """The SkillBank (skillbank.md; docs/skillbank.md): deterministic compile and inject."""


@skillbank.command("init")
@click.option("--out", "out", required=True, type=click.Path(path_type=Path), help="Bank file to create.")
@click.option("--round", "round_", default=0, show_default=True, type=click.IntRange(min=0))
@click.option("--hf-dir", type=click.Path(path_type=Path), help="Policy HF dir (tokenizer); else estimate.")
def init_cmd(out, round_, hf_dir):
    """Write an empty bank (refuses to overwrite).

    \b
    Example:
      pyhelpers skillbank init --out runs/r1/rounds/round-000/skillbank.json
    """
    if out.exists():
        raise ToolkitError("bank file already exists", str(out), "remove it or pick another --out")
    name, count = counter_for(hf_dir)
    sha = write_bank(out, empty_bank(round_, name, header_tokens(count)))
    click.echo(f"wrote empty bank {out} (round {round_}) sha256 {sha}")


@skillbank.command("compile")
@click.option("--bank", "bank_path", required=True, type=click.Path(path_type=Path), help="The round's bank.")
@click.option("--candidates", "cand_dir", required=True, type=click.Path(path_type=Path),
              help="Directory of analyst batch files (candidates/<batch_id>.json).")
@click.option("--out", "out", required=True, type=click.Path(path_type=Path), help="Compiled bank to write.")
@click.option("--round", "round_", type=click.IntRange(min=0), help="Round compiled [default: the bank's round].")
@click.option("--hf-dir", type=click.Path(path_type=Path), help="Policy HF dir: count tokens with its tokenizer.")
@click.option("--spool", "spool_dir", type=click.Path(path_type=Path), help="Spool dir: add retry exposures/successes.")
@click.option("--embedder", help="module:factory of an optional embedding backend (lexical when omitted).")
@click.option("--dry-run", is_flag=True, help="Compile and print the summary; write nothing.")
def compile_cmd(bank_path, cand_dir, out, round_, hf_dir, spool_dir, embedder, dry_run):
    """Merge a round's analyst candidates into the bank (byte-identical for the same inputs).

    Knobs: SKILL_DUP_JACCARD, SKILL_MAX_TOKENS.

    \b
    Example:
      pyhelpers skillbank compile --bank round-000/skillbank.json \\
        --candidates round-000/candidates --out round-000/compiled.json --hf-dir "$HF_MODEL"
    """
    cfg = load.load()
    bank, new, n_files = steps.compile_step(bank_path, cand_dir=cand_dir, round_=round_, hf_dir=hf_dir,
                                            spool_dir=spool_dir, dup_jaccard=cfg.SKILL_DUP_JACCARD,
                                            max_skill_tokens=cfg.SKILL_MAX_TOKENS, embedder=_embedder(embedder))
    if dry_run:
        check_bank(new, str(out))
        click.echo(f"dry run ({n_files} candidate files): " + steps.change_summary(bank, new, out=out, sha=bank_sha256(new)))
        return
    click.echo(steps.change_summary(bank, new, out=out, sha=write_bank(out, new)))


@skillbank.command("inject")
@click.option("--compiled", "compiled_path", required=True, type=click.Path(path_type=Path))
@click.option("--decisions", "decisions_path", type=click.Path(path_type=Path),
              help="gate/decisions.json (gate_decisions schema); omit when the gate tested nothing.")
@click.option("--out", "out", required=True, type=click.Path(path_type=Path), help="Next round's skillbank.json.")
@click.option("--round", "round_", type=click.IntRange(min=0),
              help="Round whose gate decided [default: the compiled bank's round]; the output is round + 1.")
@click.option("--dry-run", is_flag=True, help="Print the summary; write nothing.")
def inject_cmd(compiled_path, decisions_path, out, round_, dry_run):
    """Apply the gate's decisions and the caps; write the next round's bank.

    Knobs: BANK_MAX_ACTIVE, SKILL_TOKEN_BUDGET, GATE_MAX_ROUNDS.

    \b
    Example:
      pyhelpers skillbank inject --compiled round-000/compiled.json \\
        --decisions round-000/gate/decisions.json --out round-001/skillbank.json
    """
    compiled, new = steps.inject_step(compiled_path, decisions_path=decisions_path, round_=round_,
                                      caps=steps.caps_from(load.load()))
    if dry_run:
        check_bank(new, str(out))
        click.echo("dry run: " + steps.change_summary(compiled, new, out=out, sha=bank_sha256(new)))
        return
    click.echo(steps.change_summary(compiled, new, out=out, sha=write_bank(out, new)))


@skillbank.command("show")
@click.argument("bank_path", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Rows as JSON.")
@click.option("--status", multiple=True, help="Only skills with this status (repeatable).")
def show_cmd(bank_path, as_json, status):
    """Table of a bank: id, status, title, tokens, proposals, last gate effect [CI].

    \b
    Example:
      pyhelpers skillbank show runs/r1/rounds/round-001/skillbank.json --status active
    """
    bank = load_bank(bank_path)
    if status:
        bank = {**bank, "skills": [s for s in bank["skills"] if s["status"] in status]}
    if as_json:
        click.echo(json.dumps({"round": bank["round"], "skills": show_rows(bank)}, indent=1, sort_keys=True))
    else:
        click.echo(format_show(bank))


@skillbank.command("diff")
@click.argument("a_path", type=click.Path(path_type=Path))
@click.argument("b_path", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True)
def diff_cmd(a_path, b_path, as_json):
    """Skills added, removed, changed in status or wording from bank A to bank B.

    \b
    Example:
      pyhelpers skillbank diff round-000/compiled.json round-001/skillbank.json
    """
    d = diff_banks(load_bank(a_path), load_bank(b_path))
    click.echo(json.dumps(d, indent=1, sort_keys=True) if as_json else format_diff(d))


@skillbank.command("render")
@click.argument("bank_path", type=click.Path(path_type=Path))
@click.option("--view", type=click.Choice(["active", "full", "masked"]), default="active", show_default=True)
@click.option("--mask", default="", help="Comma-separated skill ids (view masked).")
@click.option("--budget", type=click.IntRange(min=0), help="Token budget [default: SKILL_TOKEN_BUDGET].")
@click.option("--json", "as_json", is_flag=True)
def render_cmd(bank_path, view, mask, budget, as_json):
    """Print the skills block a prompt would get (what the plugin and eval runner render).

    \b
    Example:
      pyhelpers skillbank render round-001/skillbank.json --view full
    """
    bank = load_bank(bank_path)
    budget = load.load().SKILL_TOKEN_BUDGET if budget is None else budget
    ids = [m for m in mask.split(",") if m] if view == "masked" else None
    try:
        r = render(bank, view, budget, mask=ids)
    except ValueError as exc:
        raise ToolkitError(str(exc), str(bank_path), "use ids listed by `pyhelpers skillbank show`") from None
    if as_json:
        click.echo(json.dumps({"text": r.text, "skill_ids": list(r.skill_ids), "tokens": r.tokens,
                               "dropped": list(r.dropped)}, indent=1))
    else:
        click.echo(r.text, nl=False)
        click.echo(f"# {len(r.skill_ids)} skills, {r.tokens} tokens, {len(r.dropped)} dropped", err=True)


@skillbank.command("select")
@click.argument("bank_path", type=click.Path(path_type=Path))
@click.option("--max", "max_skills", type=click.IntRange(min=0), help="[default: GATE_MAX_SKILLS]")
@click.option("--include-active", is_flag=True, help="Re-gate active skills too (they come first).")
def select_cmd(bank_path, max_skills, include_active):
    """Print (JSON list) the skill ids the gate tests this round.

    \b
    Example:
      pyhelpers skillbank select round-000/compiled.json
    """
    bank = load_bank(bank_path)
    max_skills = load.load().GATE_MAX_SKILLS if max_skills is None else max_skills
    click.echo(json.dumps(select_for_gate(bank, max_skills, include_active)))
