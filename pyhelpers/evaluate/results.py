"""One line per evaluated round, read from the round's val and gate summaries: what the driver's
notification and `make status` say about a round's results. Read-only.
"""

from __future__ import annotations

from pyhelpers.config.load import Config
from pyhelpers.jsonfiles import load_json_or_none
from pyhelpers.run.layout import RunLayout


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


def results(cfg: Config, lay: RunLayout) -> list[dict]:
    rows = []
    base = load_json_or_none(lay.baseline_val_summary)
    if base:
        rows.append({"round": "baseline", "val": val_line(base), "gate": None})
    for r in range(cfg.ROUNDS):
        val, gate = load_json_or_none(lay.val_summary(r)), load_json_or_none(lay.gate_summary(r))
        if val or gate:
            rows.append({"round": r, "val": val_line(val) if val else None, "gate": gate_line(gate) if gate else None})
    return rows
