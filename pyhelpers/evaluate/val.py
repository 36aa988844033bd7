"""Bare val: every task of the VAL_TASKS split, played once with no skills.

Writes into its directory (round-NNN/val/, or RUN_DIR/baseline/val for BASELINE_VAL):
  episodes.jsonl   one line per finished episode (the resume state)
  slots.jsonl      the slot ledger (empty after a clean finish)
  summary.json     n, success (Wilson CI), strict and loose means (CI), terminations, infra errors,
                   per_task outcomes (the gate's task pool); no wall-clock fields
  timing.json      wall time, throughput, mean latencies (kept out of the summary)
Episode ids are `val-<task_id>`. The summary is written only when every planned episode has an
outcome and at most EVAL_MAX_INFRA_SHARE of them ended in infra errors; otherwise ValRunError
says so and `--resume` plays the infra-error episodes again.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from pathlib import Path

from pyhelpers.errors import ToolkitError
from pyhelpers.evaluate.episode import EpisodeSpec
from pyhelpers.evaluate.runner import RunResult, run_episodes
from pyhelpers.evaluate.settings import EvalSettings
from pyhelpers.evaluate.stats import val_summary
from pyhelpers.jsonfiles import write_json_atomic
from pyhelpers.policy import tokenizer
from pyhelpers.policy.prompt_builder import PromptBuilder, PromptError
from pyhelpers.policy.system_prompt import PROMPT_VERSION
from pyhelpers.run import layout


def load_builder(tokenizer_dir: str) -> PromptBuilder:
    """The shared prompt builder on the policy's tokenizer (the one loader training uses too)."""
    if not Path(tokenizer_dir).is_dir():
        raise ToolkitError("no tokenizer directory for the policy", tokenizer_dir,
                           "export the round's model first (hf symlink), or pass --model-dir HF_DIR")
    return tokenizer.load_builder(tokenizer_dir, fix="point --model-dir at an HF model directory with tokenizer files")


def tasks_meta(path: Path, tasks: Sequence[dict]) -> dict:
    """How the summary names its task file: base name, count and content hash (no absolute path)."""
    return {"file": Path(path).name, "count": len(tasks),
            "sha256": hashlib.sha256(Path(path).read_bytes()).hexdigest()}


def val_specs(tasks: Sequence[dict]) -> list[EpisodeSpec]:
    return [EpisodeSpec(id=f"val-{t['task_id']}", task=t, arm="bare") for t in tasks]


def check_infra(result_records: dict, settings: EvalSettings, out_dir: Path, what: str) -> None:
    infra = sum(1 for r in result_records.values() if r["termination"] == "infra_error")
    n = len(result_records)
    if n and infra / n > settings.max_infra_share:
        raise ToolkitError(f"{infra} of {n} {what} episodes ended in infra errors (more than "
                           f"EVAL_MAX_INFRA_SHARE={settings.max_infra_share:g}); no summary written",
                           str(out_dir / "episodes.jsonl"),
                           "check ShopSimulator and the eval server (their logs), then rerun with --resume: "
                           "those episodes are played again")


def play_specs(specs: list[EpisodeSpec], settings: EvalSettings, builder: PromptBuilder, out_dir: Path, *,
               resume: bool, label: str, progress=None) -> RunResult:
    """run_episodes on a fresh event loop; timing.json is written when episodes were played."""
    try:
        result = asyncio.run(run_episodes(specs, settings, builder=builder, out_dir=out_dir, resume=resume, label=label,
                                          progress=progress))
    except PromptError as exc:
        raise ToolkitError(f"cannot build the policy's prompt: {exc}", settings.tokenizer_dir,
                           "use the policy's own tokenizer and chat template (--model-dir)") from None
    if result.played:  # a re-run that found everything done keeps the timing of the run that played
        write_json_atomic(out_dir / "timing.json", {**result.timing, "resumed": result.resumed,
                                                    "replayed_infra": result.replayed_infra,
                                                    "slot_cleanup": result.slot_cleanup})
    return result


def run_val(settings: EvalSettings, builder: PromptBuilder, tasks: Sequence[dict], out_dir: Path, *,
            resume: bool, label: str, round_no: int | None, tasks_info: dict,
            progress=None) -> tuple[dict, RunResult]:
    """Play bare val into out_dir; returns (summary, run result). The summary is also written.
    progress: a text stream for the progress line (the CLI passes stderr), None for none."""
    if not tasks:
        raise ToolkitError("the val task file has no tasks", tasks_info.get("file", ""),
                           "build it with `pyhelpers data build` (VAL_TASKS)")
    out_dir = Path(out_dir)
    specs = val_specs(tasks)
    result = play_specs(specs, settings, builder=builder, out_dir=out_dir, resume=resume, label=label, progress=progress)
    check_infra(result.records, settings, out_dir=out_dir, what="val")
    ordered = [result.records[s.id] for s in specs]
    summary = val_summary(ordered, label=label, round_no=round_no, tasks=tasks_info, settings=settings.public(),
                          prompt_version=PROMPT_VERSION)
    write_json_atomic(layout.summary(out_dir), summary)
    return summary, result


def val_report(summary: dict) -> str:
    """A few lines for people (what the CLI prints)."""
    s, st, lo = summary["success"], summary["strict"], summary["loose"]

    def pct(x):
        return "—" if x is None else f"{x * 100:.1f}%"

    terms = ", ".join(f"{k} {v}" for k, v in summary["terminations"].items() if v)
    lines = [f"Bare val ({summary['label']}): {summary['n']} scored episodes of {summary['episodes']}",
             f"  success {pct(s['rate'])} [{pct(s['ci_low'])}, {pct(s['ci_high'])}] (Wilson 95%, {s['count']}/{s['n']})",
             f"  strict  {pct(st['mean'])} [{pct(st['ci_low'])}, {pct(st['ci_high'])}]   "
             f"loose {pct(lo['mean'])} [{pct(lo['ci_low'])}, {pct(lo['ci_high'])}]",
             f"  terminations: {terms or 'none'}; turns mean {summary['turns_mean']}"]
    if summary["infra_errors"] or summary["retried"]:
        lines.append(f"  infra errors: {summary['infra_errors']} episodes excluded (e.g. "
                     f"{', '.join(summary['infra_error_ids'][:3]) or '-'}); {summary['retried']} recovered by retries")
    return "\n".join(lines) + "\n"
