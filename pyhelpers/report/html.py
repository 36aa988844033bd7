"""The report page: one self-contained HTML file beside its PNGs and CSVs (relative links only,
so the directory can be copied off the machine and opened anywhere)."""

from __future__ import annotations

import html
import time
from pathlib import Path

from pyhelpers.jsonfiles import write_bytes_atomic
from pyhelpers.report.data import BASELINE, Tables

SECTIONS = (
    ("val", "Bare validation", "Full success, strict and loose score per round with 95% intervals."),
    ("gate", "Gate", "Each tested skill's effect on success with its simultaneous interval, coloured by the "
                     "decision (accept, reject, retire, keep); dashed: ± the round's minimum detectable effect."),
    ("bank", "SkillBank", "Skills by status in the bank each round starts with, and the tokens its active skills "
                          "take in every prompt."),
    ("training", "Training", "The rollout plugin's per-step figures (and slime's train/* from W&B's offline files "
                             "when present); dotted lines mark round boundaries."),
    ("timeline", "Timeline", "Each stage of each round over time; x marks a restart or a failure."),
    ("gpu", "GPU time", "Each round's wall time, from its first stage to the next round's, split into what kept "
                        "the GPUs busy (training steps, evaluation episodes) and each phase they sat idle (job "
                        "start, checkpoint save, job teardown, export, eval server start and stop, waiting for "
                        "compile, restarts; other: the toolkit's own time)."),
)


def _val_baseline(t: Tables) -> str:
    """What the val figure's dashed line is, or why there is none (val_plot draws it exactly when
    the baseline's summary is there)."""
    if any(r["round"] == BASELINE and r.get("status") == "ok" for r in t.val):
        return " The dashed line is the base model's success (its val, BASELINE_VAL=1)."
    return (" There is no baseline line: the base model was not evaluated in this run (BASELINE_VAL=1 before "
            "the first round does that).")


def _pct(x) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _val_table(t: Tables) -> str:
    rows = []
    for r in t.val:
        if r["status"] == "missing":
            rows.append(f"<tr><td>{r['round']}</td><td colspan=4 class=missing>missing</td></tr>")
        else:
            rows.append(f"<tr><td>{r['round']}</td><td>{r['n']}</td><td>{_pct(r['success'])} "
                        f"[{_pct(r['success_low'])}, {_pct(r['success_high'])}]</td><td>{_pct(r['strict'])}</td>"
                        f"<td>{_pct(r['loose'])}</td></tr>")
    return ("<table><tr><th>round</th><th>tasks</th><th>success [95% CI]</th><th>strict</th><th>loose</th></tr>"
            + "".join(rows) + "</table>")


def _gpu_table(t: Tables) -> str:
    if t.gpu_idle_frac is None:
        head = "<p>No round has finished yet: no idle fraction.</p>"
    else:
        head = (f"<p><b>GPUs idle {_pct(t.gpu_idle_frac)} of the finished rounds' wall time.</b></p>")
    rows = "".join(f"<tr><td>{r['round']}{'' if r['finished'] else ' (running)'}</td><td>{r['wall_s']:.0f}</td>"
                   f"<td>{r['busy_s']:.0f}</td><td>{r['idle_s']:.0f}</td><td>{_pct(r['idle_frac'])}</td></tr>"
                   for r in t.gpu)
    return (head + "<table><tr><th>round</th><th>wall s</th><th>GPU busy s</th><th>GPU idle s</th><th>idle</th></tr>"
            + rows + "</table>")


def _restarts(t: Tables) -> str:
    if not t.restarts:
        return "<p>No restarts or failures recorded.</p>"
    items = "".join(f"<li>{html.escape(e['at'])}: {html.escape(e['kind'])} round {e['round']} "
                    f"{html.escape(str(e['stage'] or ''))} {html.escape(e['cause'])} — "
                    f"<code>{html.escape(str(e['detail'])[:200])}</code></li>" for e in t.restarts)
    return f"<ul>{items}</ul>"


def _where(t: Tables) -> str:
    """What the run ran on: its nodes and GPUs, or for a rehearsal what it is (`make rehearse`:
    stand-ins of slime, SGLang and ShopSimulator on the CPU; its GPU figures are the stand-ins')."""
    if not t.rehearsal:
        return f"on {t.nodes} node(s) of {t.gpus_per_node} GPU(s)"
    nodes = f" as {t.nodes} nodes (network namespaces of one machine)" if t.nodes > 1 else ""
    return (f"of a rehearsal: the toolkit on stand-ins, on the CPU{nodes} (make rehearse); the GPU time below "
            "is the stand-ins' busy and idle time")


def write(path: Path, run: str, t: Tables, pngs: dict[str, Path], csvs: dict[str, Path]) -> Path:
    notes = "".join(f"<p class=missing>{html.escape(n)}</p>" for n in t.notes)
    body = [f"<h1>Run {html.escape(run)}</h1>",
            f"<p>{t.rounds} round(s) {_where(t)}; written {time.strftime('%Y-%m-%d %H:%M:%S %z')} from the run's own files. "
            "Data: " + ", ".join(f'<a href="{p.name}">{p.name}</a>' for p in csvs.values()) + ".</p>", notes]
    for key, title, what in SECTIONS:
        what += _val_baseline(t) if key == "val" else ""
        body.append(f"<h2>{title}</h2><p>{what}</p><img src=\"{pngs[key].name}\" alt=\"{title}\">")
        if key == "val":
            body.append(_val_table(t))
        if key == "timeline":
            body.append("<h3>Restarts and failures</h3>" + _restarts(t))
        if key == "gpu":
            body.append(_gpu_table(t))
    page = ("<!doctype html><html><head><meta charset=utf-8><title>ShopSimRL report: " + html.escape(run)
            + "</title><style>body{font-family:sans-serif;max-width:1000px;margin:2em auto}img{max-width:100%}"
              "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px}.missing{color:#c62828}"
              "</style></head><body>" + "\n".join(body) + "</body></html>\n")
    write_bytes_atomic(path, page.encode("utf-8"))
    return path
