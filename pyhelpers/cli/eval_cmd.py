"""`pyhelpers eval val|gate`: bare val and the random-masked gate of a round (docs/runtime_eval.md)."""

from __future__ import annotations

import re
from pathlib import Path

import click

from .. import config as config_mod
from ..errors import ToolkitError

_ROUND = re.compile(r"round-(\d+)$")


def _common(f):
    for opt in reversed([
        click.option("--resume", is_flag=True, help="Continue a killed or failed run: release its leftover "
                     "slots, replay infra errors, skip finished episodes."),
        click.option("--wandb", "use_wandb", is_flag=True, help="Log the figures to W&B once (job_type val/gate, "
                     "group WANDB_GROUP), also across --resume."),
        click.option("--model-dir", type=click.Path(path_type=Path),
                     help="HF dir of the policy's tokenizer [default: TRAIN_SAVE/RUN_NAME/hf]."),
        click.option("--server", help="SGLang eval server URL [default: http://127.0.0.1:EVAL_PORT]."),
        click.option("--shopsim", help="ShopSimulator URL [default: http://SHOPSIM_HOST:SHOPSIM_PORT]."),
        click.option("--tasks", "tasks_path", type=click.Path(path_type=Path), help="Val task file [default: VAL_TASKS]."),
        click.option("--quiet", is_flag=True, help="No progress line on stderr."),
    ]):
        f = opt(f)
    return f


def _progress(quiet: bool):
    return None if quiet else click.get_text_stream("stderr")


def _settings(cfg, model_dir, server, shopsim):
    from ..evaluate.settings import EvalSettings

    return EvalSettings.from_config(cfg, shopsim_url=shopsim, server_url=server,
                                    tokenizer_dir=str(model_dir) if model_dir else None)


def _val_tasks(cfg, tasks_path):
    from ..tasks import load_tasks

    path = tasks_path or cfg.path("VAL_TASKS")
    return path, load_tasks(path, split="val")


@click.group("eval")
def eval_group():
    """Evaluate a round's policy: bare val, then the random-masked gate."""


@eval_group.command("val")
@click.option("--round-dir", type=click.Path(path_type=Path), help="rounds/round-NNN: writes its val/.")
@click.option("--out-dir", type=click.Path(path_type=Path), help="Write here instead (e.g. RUN_DIR/baseline/val).")
@_common
def val_cmd(round_dir, out_dir, resume, use_wandb, model_dir, server, shopsim, tasks_path, quiet):
    """Play every VAL_TASKS task once with no skills; write episodes.jsonl and summary.json.

    Success is full success (reward_detail r_type = r_att = r_option = r_price = 1) with a Wilson
    95% interval; infra errors (after EVAL_EPISODE_RETRIES) are excluded and reported.

    \b
    Example:
      pyhelpers eval val --round-dir runs/demo/rounds/round-000 --resume --wandb
      pyhelpers eval val --out-dir runs/demo/baseline/val --model-dir models/Qwen3.5-4B
    """
    from ..evaluate import val

    if round_dir is None and out_dir is None:
        raise click.UsageError("give --round-dir or --out-dir")
    cfg = config_mod.load()
    m = _ROUND.search(round_dir.resolve().name) if round_dir else None
    round_no = int(m.group(1)) if m else None
    label = f"round-{round_no:03d}" if round_no is not None else ("baseline" if out_dir else round_dir.name)
    out = out_dir or round_dir / "val"
    settings = _settings(cfg, model_dir, server, shopsim)
    path, tasks = _val_tasks(cfg, tasks_path)
    builder = val.load_builder(settings.tokenizer_dir)
    summary, result = val.run_val(settings, builder, tasks, out, resume=resume, label=label, round_no=round_no,
                                  tasks_info=val.tasks_meta(path, tasks), progress=_progress(quiet))
    click.echo(val.val_report(summary), nl=False)
    t = result.timing
    click.echo(f"  played {result.played} (resumed {result.resumed}) in {t['wall_s']:.0f} s, "
               f"{t['episodes_per_s'] or 0:.2f} episodes/s; wrote {out}/summary.json")
    if use_wandb:
        from ..evaluate.wandb_val import log_val

        res = log_val(summary, project=cfg["WANDB_PROJECT"], group=cfg["WANDB_GROUP"], run_dir=cfg.run_dir,
                      mode=cfg.get("WANDB_MODE") or None)
        click.echo(f"W&B run {res['run_id']}: " + ("logged" if res["logged"] else "already logged, nothing sent"))


@eval_group.command("gate")
@click.option("--round-dir", type=click.Path(path_type=Path), required=True,
              help="rounds/round-NNN with compiled.json and val/summary.json; writes its gate/.")
@_common
def gate_cmd(round_dir, resume, use_wandb, model_dir, server, shopsim, tasks_path, quiet):
    """Plan (or resume) the round's random-masked gate, play it, estimate and decide.

    Writes gate/plan.json, episodes.jsonl, decisions.json (read by `skillbank inject`) and
    summary.json, then prints the report with the minimum detectable effect.
    Knobs: GATE_PAIRS, GATE_ARM_EPISODES, GATE_SEED, GATE_MAX_SKILLS, GATE_FAILED_SHARE, GATE_ALPHA.

    \b
    Example:
      pyhelpers eval gate --round-dir runs/demo/rounds/round-000 --resume --wandb
    """
    from ..evaluate import gate, val
    from ..gate.plan import GateKnobs
    from ..gate.report import gate_report
    from ..jsonfiles import load_json
    from ..skills.bank import bank_sha256, load_bank

    cfg = config_mod.load()
    compiled = round_dir / "compiled.json"
    if not compiled.is_file():
        raise ToolkitError("the round has no compiled bank", str(compiled), "run the compile stage first")
    val_path = round_dir / "val" / "summary.json"
    if not val_path.is_file():
        raise ToolkitError("the round has no bare val summary", str(val_path),
                           "run `pyhelpers eval val --round-dir` first (the gate's task pool uses it)")
    bank = load_bank(compiled)
    knobs = GateKnobs.from_config(cfg)
    settings = _settings(cfg, model_dir, server, shopsim)
    _, tasks = _val_tasks(cfg, tasks_path)
    summary, doc, result = gate.run_gate(settings, lambda: val.load_builder(settings.tokenizer_dir), bank,
                                         bank_sha256(bank), load_json(val_path), tasks, round_dir / "gate", knobs,
                                         resume=resume, progress=_progress(quiet))
    if not summary["skills"]:
        click.echo(f"Gate round {bank['round']}: no skills to test (no probation or candidate skill); "
                   "wrote empty decisions.")
    else:
        click.echo(gate_report(summary, titles={s["id"]: s["title"] for s in bank["skills"]}), nl=False)
    inf = summary["infra"]
    if inf["infra_errors"] or inf["retried"]:
        click.echo(f"Infra errors: {inf['infra_errors']} episodes excluded, {inf['retried']} recovered by retries.")
    if result is not None:
        click.echo(f"played {result.played} (resumed {result.resumed}) in {result.timing['wall_s']:.0f} s")
    click.echo(f"wrote {round_dir / 'gate'}/decisions.json and summary.json")
    if use_wandb:
        from ..gate.wandb_log import log_gate
        from ..skills.decisions import Caps, apply_decisions

        caps = Caps(max_active=cfg.int("BANK_MAX_ACTIVE"), token_budget=cfg.int("SKILL_TOKEN_BUDGET"),
                    max_gate_rounds=cfg.int("GATE_MAX_ROUNDS"))
        nxt = apply_decisions(bank, doc["decisions"], int(bank["round"]), caps)
        counts: dict[str, int] = {}
        for s in nxt["skills"]:
            counts[s["status"]] = counts.get(s["status"], 0) + 1
        res = log_gate(summary, doc, counts, project=cfg["WANDB_PROJECT"], group=cfg["WANDB_GROUP"],
                       run_dir=cfg.run_dir, round=int(bank["round"]), mode=cfg.get("WANDB_MODE") or None)
        click.echo(f"W&B run {res['run_id']}: " + ("logged" if res["logged"] else "already logged, nothing sent"))
