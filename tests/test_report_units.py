"""The report's page and figures on made-up tables (no rehearsal): what the page says matches
what the figures show, step axes are integers, nothing but the report lands in report/."""

from __future__ import annotations

import pytest

from pyhelpers.report import data, html, plots


def _tables(baseline: bool, steps: int = 4) -> data.Tables:
    t = data.Tables(2)
    ok = {"status": "ok", "n": 40, "success": 0.4, "success_low": 0.3, "success_high": 0.5, "strict": 0.5,
          "strict_low": 0.4, "strict_high": 0.6, "loose": 0.7, "loose_low": 0.6, "loose_high": 0.8}
    if baseline:
        t.val.append({**ok, "round": "baseline"})
    t.val += [{**ok, "round": 0}, {**ok, "round": 1}]
    t.steps = [{"round": s // 2, "step": s, "reward": 0.1 * s, "success": 0.2, "retry_rate": 0.5, "turns": 6}
               for s in range(steps)]
    t.train = [{"step": i, "train/loss": 1.0 / (i + 1)} for i in range(2 * steps)]
    return t


def _page(tmp_path, t: data.Tables) -> str:
    pngs = {k: tmp_path / f"{k}.png" for k in ("val", "gate", "bank", "training", "timeline", "gpu")}
    return html.write(tmp_path / "index.html", "r", t=t, pngs=pngs, csvs={}).read_text()


def test_the_page_mentions_a_baseline_line_only_when_there_is_one(tmp_path):
    without = _page(tmp_path, _tables(baseline=False))
    val_text = without.split("<h2>Gate")[0]
    assert "dashed" not in val_text and "There is no baseline line" in val_text
    with_base = _page(tmp_path, _tables(baseline=True)).split("<h2>Gate")[0]
    assert "The dashed line is the base model's success" in with_base


@pytest.mark.parametrize("steps", [2, 3, 4])
def test_step_axes_carry_only_integer_ticks(tmp_path, monkeypatch, steps):
    figs = []
    monkeypatch.setattr(plots, "_save", lambda plt, fig, path: figs.append(fig) or path)
    plt = plots._plt(tmp_path / "mpl")
    plots.training_plot(plt, _tables(baseline=False, steps=steps), 2, tmp_path / "training.png")
    axes = [ax for ax in figs[0].axes if ax.axison]
    assert len(axes) == 5
    for ax in axes:
        lo, hi = ax.get_xlim()
        shown = [x for x in ax.get_xticks() if lo <= x <= hi]
        assert shown and all(float(x).is_integer() for x in shown), (ax.get_title(), shown)
    plt.close("all")


def test_the_report_directory_holds_no_matplotlib_cache(tmp_path):
    """matplotlib writes its font cache into MPLCONFIGDIR at import: not inside report/, which is
    what a user copies off the machine (a fresh process, as `make report` is)."""
    import os
    import subprocess
    import sys

    out = tmp_path / "run" / "report"
    script = (
        "import sys; from types import SimpleNamespace; from pathlib import Path\n"
        "sys.path.insert(0, 'tests')\n"
        "from test_report_units import _tables\n"
        "from pyhelpers import report\nfrom pyhelpers.report import data\n"
        "data.gather = lambda cfg, lay: _tables(baseline=False)\n"
        f"run = Path({str(tmp_path / 'run')!r})\n"
        "report.build(SimpleNamespace(run_name='r'), SimpleNamespace(run_dir=run, steps_per_round=2), run / 'report')\n")
    env = {k: v for k, v in os.environ.items() if k != "MPLCONFIGDIR"}
    res = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert (out / "index.html").is_file()
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["index.html", "val.png", "gate.png", "bank.png", "training.png", "timeline.png", "val.csv", "gate.csv",
         "bank.csv", "steps.csv", "train.csv", "timeline.csv", "restarts.csv", "gpu.png", "gpu.csv"])


def test_gpu_bars_add_up_to_each_rounds_wall_time_and_the_page_gives_the_idle_fraction(tmp_path, monkeypatch):
    """Issue 29: per-round stacked bars (busy vs each idle phase) whose heights add up to the
    round's wall time within 1 %, and the run's idle fraction, from events alone."""
    from test_gpu_time import one_round

    evs = one_round(0, 1000.0) + one_round(1, 1202.7)
    evs[-1:] = []  # round 1's inject never ended: still running
    t = _tables(baseline=False)
    t.gpu, t.gpu_idle_frac = data.gpu_rows(evs)
    walls = {row["round"]: row["wall_s"] for row in t.gpu}
    assert walls[0] == pytest.approx(202.7) and [row["finished"] for row in t.gpu] == [True, False]
    figs = []
    monkeypatch.setattr(plots, "_save", lambda plt, fig, path: figs.append(fig) or path)
    plt = plots._plt(tmp_path / "mpl")
    plots.gpu_plot(plt, t, tmp_path / "gpu.png")
    tops: dict[int, float] = {}
    for patch in figs[0].axes[0].patches:
        i = round(patch.get_x() + patch.get_width() / 2)
        tops[i] = max(tops.get(i, 0.0), patch.get_y() + patch.get_height())
    plt.close("all")
    assert sorted(tops) == [0, 1]
    for i, row in enumerate(t.gpu):
        assert abs(tops[i] - row["wall_s"]) <= 0.01 * row["wall_s"], (row, tops[i])
    page = _page(tmp_path, t)
    assert f"GPUs idle {100 * t.gpu_idle_frac:.1f}% of the finished rounds" in page
    assert t.gpu_idle_frac == pytest.approx(t.gpu[0]["idle_s"] / t.gpu[0]["wall_s"], abs=1e-4)
