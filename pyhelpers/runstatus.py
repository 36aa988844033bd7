"""What `make status` and the end-of-run summary show, read from the run's files only."""

from __future__ import annotations

import json
from pathlib import Path

from .runlayout import RunLayout


def _load(path: Path) -> dict | None:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None


def val_line(summary: dict) -> str:
    s = summary["success"]
    rate = "n/a" if s["rate"] is None else f"{100 * s['rate']:.1f}%"
    ci = "" if s["ci_low"] is None else f" [{100 * s['ci_low']:.1f}, {100 * s['ci_high']:.1f}]"
    return f"val success {rate}{ci} of {summary['n']}"


def gate_line(summary: dict) -> str:
    counts = {k: v for k, v in (summary.get("counts") or {}).items() if v}
    what = ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "no skills tested"
    mde = summary.get("mde")
    return f"gate: {what}" + (f" (MDE {100 * mde:.0f} points)" if mde else "")


def bank_line(bank: dict) -> str:
    counts: dict[str, int] = {}
    for s in bank.get("skills", []):
        counts[s["status"]] = counts.get(s["status"], 0) + 1
    return ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "empty"


def summary_lines(cfg, lay: RunLayout) -> list[str]:
    out = [f"run {cfg.run_name}: {cfg.int('ROUNDS')} round(s) of {cfg.int('STEPS_PER_ROUND')} steps"]
    base = _load(lay.baseline_dir / "val" / "summary.json")
    if base:
        out.append(f"  baseline   {val_line(base)}")
    for r in range(cfg.int("ROUNDS")):
        val, gate = _load(lay.val_summary(r)), _load(lay.gate_summary(r))
        parts = [val_line(val) if val else "val missing", gate_line(gate) if gate else "gate missing"]
        out.append(f"  round {r:03d}  " + "; ".join(parts))
    final = _load(lay.final_bank)
    out.append(f"  final bank {lay.final_bank}: " + (bank_line(final) if final else "not written yet"))
    return out
