"""The report's figures (matplotlib, Agg: no display), each written to a temp name and renamed.

matplotlib is the one dependency the report adds (env/requirements.txt says why); it is imported
only here, so nothing else pays for it -- and only when a figure has to be drawn.

A figure is drawn again only when what it shows changed. Each figure declares the tables it
reads (FIGURES); its function is handed a Tables holding only those, so it cannot show anything
its key leaves out. The key (sha256 of those inputs, the source of this module and data.py, and
matplotlib's version) is stored in the PNG itself, as a tEXt chunk: a PNG already in place whose
key matches is kept as it is (a run's report after each round and at its end redraws only what the
round changed; `make report` on an unchanged run draws nothing and never imports matplotlib). No
file beside the PNGs: report/ holds only the report, and a PNG written by an older toolkit, or
copied in, or torn, simply has no matching key and is drawn again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import math
import os
import struct
from importlib import metadata
from pathlib import Path

from pyhelpers.jsonfiles import write_bytes_atomic
from pyhelpers.report.data import BASELINE, STAGES, STATUSES, Tables
from pyhelpers.run import gpu_time

KEY_FIELD = "ShopSimRL-figure-key"  # the PNG tEXt keyword that holds the figure's key

DECISION_COLORS = {"accept": "#2e7d32", "reject": "#c62828", "retire": "#9e9e9e", "keep": "#1565c0"}
# busy in greens, idle phases in warm/grey tones (gpu_time.PHASES order, bottom to top)
PHASE_COLORS = {"train-steps": "#1b5e20", "episodes": "#66bb6a", "server-start": "#c62828", "job-start": "#ef6c00",
                "checkpoint": "#6a1b9a", "teardown": "#8d6e63", "hf-export": "#ab47bc", "server-stop": "#f06292",
                "compile-wait": "#f9a825", "restart": "#212121", "other": "#bdbdbd"}
STATUS_COLORS = {"active": "#2e7d32", "probation": "#1565c0", "candidate": "#90caf9", "retired": "#9e9e9e",
                 "rejected": "#c62828", "merged": "#ffcc80"}


def _plt(mpl_dir: Path):
    os.environ.setdefault("MPLCONFIGDIR", str(mpl_dir))  # its font cache: off the small system disk (M2)
    import matplotlib  # heavy: matplotlib (~0.5 s), only when drawing

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after use("Agg"): no display on a GPU box

    return plt


def _save(plt, fig, path: Path, fig_key: str = "") -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight", metadata={KEY_FIELD: fig_key} if fig_key else None)
    plt.close(fig)
    write_bytes_atomic(path, buf.getvalue())
    return path


def _num(x):
    return math.nan if x is None else float(x)


def val_plot(plt, t: Tables, path: Path, *, fig_key: str = "") -> Path:
    fig, ax = plt.subplots(figsize=(8, 4))
    rows = [r for r in t.val if r["round"] != BASELINE]
    xs = [r["round"] for r in rows]
    for key, color, dx in (("success", "#2e7d32", -0.12), ("strict", "#1565c0", 0.0), ("loose", "#ef6c00", 0.12)):
        ys = [_num(r.get(key)) for r in rows]
        lo = [y - _num(r.get(f"{key}_low")) if r.get(f"{key}_low") is not None else 0 for y, r in zip(ys, rows, strict=False)]
        hi = [_num(r.get(f"{key}_high")) - y if r.get(f"{key}_high") is not None else 0 for y, r in zip(ys, rows, strict=False)]
        ax.errorbar([x + dx for x in xs], ys, yerr=[lo, hi], fmt="o-", color=color, capsize=3, label=key)
    base = next((r for r in t.val if r["round"] == BASELINE and r.get("status") == "ok"), None)
    if base:
        ax.axhline(base["success"], color="#2e7d32", ls="--", lw=1, label="baseline success")
    for r in rows:
        if r["status"] == "missing":
            ax.annotate("missing", (r["round"], 0.02), ha="center", color="#c62828")
    ax.set(xlabel="round", ylabel="bare val (95% CI)", ylim=(0, 1), xticks=xs, title="Bare validation per round")
    ax.legend(loc="upper left", fontsize=8)
    return _save(plt, fig, path, fig_key)


def gate_plot(plt, t: Tables, path: Path, *, fig_key: str = "") -> Path:
    rounds = sorted({g["round"] for g in t.gate})
    fig, axes = plt.subplots(max(1, len(rounds)), 1, figsize=(8, 1.2 + 0.45 * max(1, len(t.gate))), sharex=True,
                             squeeze=False, constrained_layout=True)
    if not rounds:
        axes[0][0].text(0.5, 0.5, "no skills tested yet", ha="center", va="center")
        axes[0][0].set_axis_off()
    for ax, r in zip((a[0] for a in axes), rounds, strict=False):
        rows = [g for g in t.gate if g["round"] == r]
        for y, g in enumerate(rows):
            est = 100 * _num(g["estimate"])
            color = DECISION_COLORS.get(g["decision"], "black")
            ax.plot([100 * _num(g["ci_low"]), 100 * _num(g["ci_high"])], [y, y], color=color, lw=2)
            ax.plot([est], [y], "o", color=color)
            ax.annotate(f" {g['decision']}", (100 * _num(g["ci_high"]), y), fontsize=7, color=color, va="center")
        mde = rows[0]["mde"]
        ax.axvline(0, color="black", lw=0.8)
        if mde:
            for sign in (-1, 1):
                ax.axvline(sign * 100 * mde, color="#9e9e9e", ls="--", lw=0.8)
        ax.set_yticks(range(len(rows)), [g["title"][:34] or g["skill"] for g in rows], fontsize=7)
        ax.set_title(f"gate, round {r}: effect in success points (simultaneous CI); dashed: ±MDE", fontsize=9)
    axes[-1][0].set_xlabel("effect (percentage points)")
    return _save(plt, fig, path, fig_key)


def bank_plot(plt, t: Tables, path: Path, *, fig_key: str = "") -> Path:
    rows = [b for b in t.bank if b["status"] == "ok"]
    fig, ax = plt.subplots(figsize=(8, 4))
    labels = [str(b["round"]) for b in rows]
    bottom = [0] * len(rows)
    for status in STATUSES:
        vals = [b.get(status, 0) for b in rows]
        if any(vals):
            ax.bar(labels, vals, bottom=bottom, color=STATUS_COLORS[status], label=status)
            bottom = [a + v for a, v in zip(bottom, vals, strict=False)]
    ax.set(xlabel="bank injected into round (final = after the last round)", ylabel="skills",
           title="SkillBank over rounds")
    if rows:
        ax2 = ax.twinx()
        ax2.plot(labels, [b["active_tokens"] for b in rows], "k.-", label="active tokens")
        ax2.set_ylabel("tokens of active skills")
    ax.legend(loc="upper left", fontsize=8)
    return _save(plt, fig, path, fig_key)


def training_plot(plt, t: Tables, steps_per_round: int, path: Path, *, fig_key: str = "") -> Path:
    panels = [("reward", "reward (mean)"), ("success", "success rate"), ("retry_rate", "retry rate"),
              ("turns", "turns (mean)")]
    train_keys = [k for k in ("train/loss", "train/grad_norm") if any(k in row for row in t.train)]
    n = len(panels) + len(train_keys)
    cols = 3 if n > 4 else 2
    fig, axes = plt.subplots(math.ceil(n / cols), cols, figsize=(4 * cols, 3 * math.ceil(n / cols)), squeeze=False,
                             constrained_layout=True)
    flat = [a for row in axes for a in row]
    xs = [s["step"] for s in t.steps]
    for ax, (key, title) in zip(flat, panels, strict=False):
        ax.plot(xs, [_num(s.get(key)) for s in t.steps], ".-")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("rollout step", fontsize=8)
    for ax, key in zip(flat[len(panels):], train_keys, strict=False):
        ax.plot([row["step"] for row in t.train], [_num(row.get(key)) for row in t.train], ".-", color="#6a1b9a")
        ax.set_title(f"{key} (W&B)", fontsize=9)
        ax.set_xlabel("optimizer step", fontsize=8)
    from matplotlib.ticker import MaxNLocator  # heavy: as in _plt

    for ax in flat[:n]:  # steps are whole numbers: never a tick at 0.5
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in flat[:len(panels)]:
        for r in range(1, t.rounds):
            ax.axvline(r * steps_per_round - 0.5, color="#9e9e9e", ls=":", lw=1)
    for ax in flat[n:]:
        ax.set_axis_off()
    fig.suptitle("Training, per step (dotted: round boundaries)")
    return _save(plt, fig, path, fig_key)


def timeline_plot(plt, t: Tables, path: Path, *, fig_key: str = "") -> Path:
    fig, ax = plt.subplots(figsize=(10, 1.5 + 0.4 * (t.rounds + 1)))
    if not t.timeline:
        ax.text(0.5, 0.5, "no stage has run yet", ha="center", va="center")
        ax.set_axis_off()
        return _save(plt, fig, path, fig_key)
    t0 = min(row["start_t"] for row in t.timeline)
    last = max((row["end_t"] or row["start_t"]) for row in t.timeline)
    for row in t.timeline:
        y = -1 if row["round"] is None or row["stage"] == BASELINE else row["round"]
        end = row["end_t"] or last
        color = STAGES[row["stage"]].colour if row["stage"] in STAGES else "black"
        ax.barh(y, (end - row["start_t"]) / 60, left=(row["start_t"] - t0) / 60, color=color,
                hatch="//" if row["status"] not in (0, None) else None, edgecolor="white")
    for e in t.restarts:
        y = -1 if e["round"] is None else e["round"]
        ax.plot([(e["t"] - t0) / 60], [y], "x", color="#c62828", ms=10, mew=2)
    handles = [plt.Rectangle((0, 0), 1, 1, color=s.colour) for s in STAGES.values()]
    ax.legend(handles, [s.label for s in STAGES.values()], fontsize=7, ncol=len(STAGES), loc="upper center", bbox_to_anchor=(0.5, -0.25))
    ax.set(xlabel="minutes since the run's first stage", ylabel="round", title="Stages over time (x: restart or failure;"
           " hatched: failed)")
    ys = sorted({-1 if row["round"] is None or row["stage"] == BASELINE else row["round"] for row in t.timeline})
    ax.set_yticks(ys, [BASELINE if y == -1 else str(y) for y in ys])
    ax.invert_yaxis()
    return _save(plt, fig, path, fig_key)


# figure -> the Tables fields it reads (besides steps_per_round for training); its function sees only these
FIGURES = {"val": ("val",), "gate": ("gate",), "bank": ("bank",), "training": ("rounds", "steps", "train"),
           "timeline": ("rounds", "timeline", "restarts"), "gpu": ("gpu", "gpu_idle_frac")}
_HERE = Path(__file__).resolve().parent


def _code_version() -> str:
    """What draws a figure besides its data: this module, data.py's constants, the stages'
    colours and labels, matplotlib's version (read from its metadata: no import)."""
    h = hashlib.sha256()
    for f in ("plots.py", "data.py"):
        h.update((_HERE / f).read_bytes())
    h.update(repr([(s.name, s.colour, s.label) for s in STAGES.values()]).encode())
    h.update(repr((gpu_time.PHASES, gpu_time.BUSY)).encode())  # the GPU figure's stacking order
    try:
        h.update(metadata.version("matplotlib").encode())
    except metadata.PackageNotFoundError:
        pass
    return h.hexdigest()


def view(name: str, t: Tables) -> Tables:
    """The Tables figure `name` is drawn from: its FIGURES fields, every other one left empty."""
    return Tables(**{f: getattr(t, f) for f in FIGURES[name] if f != "rounds"},
                  rounds=t.rounds if "rounds" in FIGURES[name] else 0)


def figure_key(name: str, t: Tables, steps_per_round: int, code: str) -> str:
    v = dataclasses.asdict(view(name, t))
    inputs = {f: v[f] for f in FIGURES[name]}
    if name == "training":
        inputs["steps_per_round"] = steps_per_round
    blob = json.dumps([name, code, inputs], sort_keys=True, default=str, allow_nan=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def stored_key(path: Path) -> str | None:
    """The key in a PNG's tEXt chunk, or None: no file, not a whole PNG (up to IEND), no key."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    pos, key = 8, None
    while pos + 8 <= len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, end = data[pos + 4:pos + 8], pos + 12 + length
        if end > len(data):
            return None
        if kind == b"tEXt":
            word, _, text = data[pos + 8:pos + 8 + length].partition(b"\0")
            if word == KEY_FIELD.encode():
                key = text.decode("latin-1")
        elif kind == b"IEND":
            return key
        pos = end
    return None


def _draw(name: str, plt, t: Tables, steps_per_round: int, path: Path, key: str) -> Path:
    fns = {"val": val_plot, "gate": gate_plot, "bank": bank_plot, "timeline": timeline_plot, "gpu": gpu_plot}
    if name == "training":
        return training_plot(plt, t, steps_per_round, path, fig_key=key)
    return fns[name](plt, t, path, fig_key=key)


def gpu_plot(plt, t: Tables, path: Path, *, fig_key: str = "") -> Path:
    """One stacked bar per round: seconds of each GPU-busy and GPU-idle phase (they add up to the
    round's wall time: gpu_time.split partitions it)."""
    fig, ax = plt.subplots(figsize=(10, 4))
    if not t.gpu:
        ax.text(0.5, 0.5, "no round has started yet", ha="center", va="center")
        ax.set_axis_off()
        return _save(plt, fig, path, fig_key)
    xs = [str(row["round"]) + ("" if row["finished"] else " (running)") for row in t.gpu]
    bottom = [0.0] * len(t.gpu)
    for phase in gpu_time.PHASES:
        h = [row[f"{phase}_s"] for row in t.gpu]
        label = phase + (" (busy)" if phase in gpu_time.BUSY else "")
        ax.bar(xs, h, bottom=bottom, color=PHASE_COLORS[phase], label=label, edgecolor="white", linewidth=0.3)
        bottom = [b + x for b, x in zip(bottom, h, strict=True)]
    frac = "—" if t.gpu_idle_frac is None else f"{100 * t.gpu_idle_frac:.1f}%"
    ax.set(xlabel="round", ylabel="seconds", title=f"GPU time per round: busy vs each idle phase (run idle: {frac})")
    ax.legend(fontsize=7, ncol=1, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return _save(plt, fig, path, fig_key)


def draw_all(t: Tables, steps_per_round: int, out: Path, cache_dir: Path) -> dict[str, Path]:
    """The six figures into `out`, each only if its PNG there does not already show these data;
    matplotlib's font cache in `cache_dir` (not in `out`, which is the report a user copies away)."""
    code, plt, paths = _code_version(), None, {}
    for name in FIGURES:
        path, key = out / f"{name}.png", figure_key(name, t, steps_per_round, code)
        if stored_key(path) != key:
            plt = plt or _plt(cache_dir)
            _draw(name, plt, view(name, t), steps_per_round, path, key)
        paths[name] = path
    return paths
