"""Bare val and the gate of one round, as the CLI (`pyhelpers eval val|gate`) and the training
loop's evaluate stage both run them; and their W&B logging from the files they wrote, so it can
run later, in the background (log once: pyhelpers/tracking/wandb_log.py).

`echo` receives the report lines (the CLI prints them; the stage streams them to its log)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pyhelpers.config.load import Config
from pyhelpers.errors import ToolkitError
from pyhelpers.evaluate import gate, val
from pyhelpers.evaluate.runner import record_episodes
from pyhelpers.evaluate.wandb_val import log_val
from pyhelpers.gate.plan import GateKnobs
from pyhelpers.gate.report import gate_report
from pyhelpers.gate.wandb_log import log_gate
from pyhelpers.jsonfiles import load_json
from pyhelpers.run import layout
from pyhelpers.run.layout import RoundFiles
from pyhelpers.skills.bank import bank_sha256, load_bank, status_counts
from pyhelpers.skills.decisions import apply_decisions
from pyhelpers.skills.steps import caps_from
from pyhelpers.tasks.files import load_tasks

Echo = Callable[[str], None]


def val_tasks(cfg: Config, tasks_path: Path | None):
    path = tasks_path or cfg.VAL_TASKS
    return path, load_tasks(path, split="val")


def play_val(cfg: Config, settings, builder, *, out: Path, round_no: int | None, label: str, tasks_path: Path | None,
             resume: bool, echo: Echo, progress=None) -> dict:
    path, tasks = val_tasks(cfg, tasks_path)
    summary, result = val.run_val(settings, builder, tasks=tasks, out_dir=out, resume=resume, label=label, round_no=round_no,
                                  tasks_info=val.tasks_meta(path, tasks), progress=progress)
    echo(val.val_report(summary).rstrip("\n"))
    t = result.timing
    record_episodes(cfg.run_dir, "val", round_no=round_no, result=result)
    echo(f"  played {result.played} (resumed {result.resumed}) in {t['wall_s']:.0f} s, "
         f"{t['episodes_per_s'] or 0:.2f} episodes/s; wrote {out}/summary.json")
    return summary


def play_gate(cfg: Config, settings, builder_factory, *, round_dir: Path, tasks_path: Path | None, resume: bool, echo: Echo,
              progress=None) -> dict:
    files = RoundFiles(round_dir)
    compiled = files.compiled
    if not compiled.is_file():
        raise ToolkitError("the round has no compiled bank", str(compiled), "run the compile stage first")
    val_path = layout.summary(files.val_dir)
    if not val_path.is_file():
        raise ToolkitError("the round has no bare val summary", str(val_path),
                           "run `pyhelpers eval val --round-dir` first (the gate's task pool uses it)")
    bank = load_bank(compiled)
    _, tasks = val_tasks(cfg, tasks_path)
    summary, _doc, result = gate.run_gate(settings, builder_factory, bank=bank, bank_sha256=bank_sha256(bank), val_summary=load_json(val_path),
                                          val_tasks=tasks, gate_dir=files.gate_dir, knobs=GateKnobs.from_config(cfg), resume=resume,
                                          progress=progress)
    if not summary["skills"]:
        echo(f"Gate round {bank['round']}: no skills to test (no probation or candidate skill); wrote empty decisions.")
    else:
        echo(gate_report(summary, titles={s["id"]: s["title"] for s in bank["skills"]}).rstrip("\n"))
    inf = summary["infra"]
    if inf["infra_errors"] or inf["retried"]:
        echo(f"Infra errors: {inf['infra_errors']} episodes excluded, {inf['retried']} recovered by retries.")
    if result is not None:
        echo(f"played {result.played} (resumed {result.resumed}) in {result.timing['wall_s']:.0f} s")
        record_episodes(cfg.run_dir, "gate", round_no=int(bank["round"]), result=result)
    echo(f"wrote {files.gate_decisions} and {layout.summary(files.gate_dir).name}")
    return summary


def log_val_wandb(cfg: Config, out: Path) -> str:
    res = log_val(load_json(layout.summary(out)), project=cfg.WANDB_PROJECT, group=cfg.WANDB_GROUP,
                  run_dir=cfg.run_dir, mode=cfg.WANDB_MODE or None)
    return f"W&B run {res['run_id']}: " + ("logged" if res["logged"] else "already logged, nothing sent")


def log_gate_wandb(cfg: Config, round_dir: Path) -> str:
    files = RoundFiles(round_dir)
    bank = load_bank(files.compiled)
    doc = load_json(files.gate_decisions)
    counts = status_counts(apply_decisions(bank, doc["decisions"], round=int(bank["round"]), caps=caps_from(cfg)))
    res = log_gate(load_json(layout.summary(files.gate_dir)), doc, counts, project=cfg.WANDB_PROJECT,
                   group=cfg.WANDB_GROUP, run_dir=cfg.run_dir, round=int(bank["round"]),
                   mode=cfg.WANDB_MODE or None)
    return f"W&B run {res['run_id']}: " + ("logged" if res["logged"] else "already logged, nothing sent")
