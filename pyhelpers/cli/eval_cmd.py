"""`pyhelpers eval val|gate`: bare val and the random-masked gate of a round (docs/runtime_eval.md)."""

from __future__ import annotations

from pathlib import Path

import click

from pyhelpers.config import load
from pyhelpers.config.load import Config
from pyhelpers.evaluate.settings import EvalSettings
from pyhelpers.run.layout import RoundFiles, round_name


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


def _settings(cfg: Config, model_dir, server, shopsim):
    return EvalSettings.from_config(cfg, shopsim_url=shopsim, server_url=server,
                                    tokenizer_dir=str(model_dir) if model_dir else None)


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
    # lazy: evaluate.round (~142 ms), evaluate.val (~104 ms) only for this command
    from pyhelpers.evaluate import round, val

    if round_dir is None and out_dir is None:
        raise click.UsageError("give --round-dir or --out-dir")
    cfg = load.load()
    round_no = RoundFiles(round_dir.resolve()).number if round_dir else None
    label = round_name(round_no) if round_no is not None else ("baseline" if out_dir else round_dir.name)
    out = out_dir or RoundFiles(round_dir).val_dir
    settings = _settings(cfg, model_dir, server=server, shopsim=shopsim)
    builder = val.load_builder(settings.tokenizer_dir)
    round.play_val(cfg, settings, builder, out=out, round_no=round_no, label=label, tasks_path=tasks_path, resume=resume,
                 echo=click.echo, progress=_progress(quiet))
    if use_wandb:
        click.echo(round.log_val_wandb(cfg, out))


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
    # lazy: evaluate.round (~142 ms), evaluate.val (~104 ms) only for this command
    from pyhelpers.evaluate import round, val

    cfg = load.load()
    settings = _settings(cfg, model_dir, server=server, shopsim=shopsim)
    round.play_gate(cfg, settings, lambda: val.load_builder(settings.tokenizer_dir), round_dir=round_dir,
                  tasks_path=tasks_path, resume=resume, echo=click.echo, progress=_progress(quiet))
    if use_wandb:
        click.echo(round.log_gate_wandb(cfg, round_dir))
