"""The report's page and figures on made-up tables (no rehearsal): what the page says matches
what the figures show, step axes are integers, nothing but the report lands in report/."""

from __future__ import annotations

import pytest

from pyhelpers import stages
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
    monkeypatch.setattr(plots, "_save", lambda plt, fig, path, *_: figs.append(fig) or path)
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
    monkeypatch.setattr(plots, "_save", lambda plt, fig, path, *key: figs.append(fig) or path)
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



def _full_tables() -> data.Tables:
    """Every table the figures read, filled (two rounds; a failed stage, a restart)."""
    t = _tables(baseline=True)
    t.gate = [{"round": r, "skill": f"sk-{r}{i}", "title": f"skill {i}", "estimate": 0.05 * i - 0.05,
               "ci_low": 0.05 * i - 0.2, "ci_high": 0.05 * i + 0.1, "decision": d, "mde": 0.1}
              for r in range(2) for i, d in enumerate(("accept", "reject", "keep"))]
    t.bank = [{"round": r, "status": "ok", "active": 2 + r, "candidate": 1, "retired": r, "active_tokens": 40 * (r + 1)}
              for r in (0, 1, "final")[:2]] + [{"round": "final", "status": "missing"}]
    t.timeline = [{"round": r, "stage": s, "start": "", "start_t": 100.0 * r + 10 * i, "end_t": 100.0 * r + 10 * i + 8,
                   "seconds": 8.0, "status": 1 if (r, s) == (1, "evaluate") else 0}
                  for r in range(2) for i, s in enumerate(stages.NAMES)]
    t.restarts = [{"at": "", "t": 135.0, "kind": "run-restart", "round": 1, "stage": "evaluate", "cause": "crash",
                   "detail": "x"}]
    t.notes, t.nodes, t.gpus_per_node = ["a note"], 2, 8
    from test_gpu_time import one_round

    t.gpu, t.gpu_idle_frac = data.gpu_rows(one_round(0, 0.0) + one_round(1, 202.5))
    return t


FIGURES = ("val", "gate", "bank", "training", "timeline", "gpu")  # in draw_all's order


@pytest.fixture
def drawn(monkeypatch):
    """Counts what draw_all draws: matplotlib's import, and each figure, drawn as a blank one saved
    by the real _save (its key in the PNG; test_each_figure_... draws the real ones)."""
    calls = []

    def stand_in(name):
        def draw(plt, t, *args, fig_key="", **kw):
            calls.append(name)
            return plots._save(plt, plt.figure(figsize=(1, 1)), kw.get("path") or args[-1], *[fig_key][:bool(fig_key)])
        return draw

    for name in FIGURES:
        monkeypatch.setattr(plots, f"{name}_plot", stand_in(name))
    real_plt = plots._plt
    monkeypatch.setattr(plots, "_plt", lambda d: calls.append("import matplotlib") or real_plt(d))
    return calls


def test_a_figure_is_drawn_again_only_when_what_it_shows_changed(tmp_path, drawn, monkeypatch):
    out, mpl = tmp_path / "report", tmp_path / "mpl"
    t = _full_tables()
    pngs = plots.draw_all(t, 2, out, mpl)
    assert drawn == ["import matplotlib", *FIGURES]
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{n}.png" for n in FIGURES)  # no file beside them
    first = {n: p.read_bytes() for n, p in pngs.items()}

    drawn.clear()
    assert plots.draw_all(t, 2, out, mpl) == pngs
    assert drawn == []  # nothing drawn, matplotlib not even imported
    assert {n: p.read_bytes() for n, p in pngs.items()} == first

    t.val[-1] = {**t.val[-1], "success": 0.45}
    plots.draw_all(t, 2, out, mpl)
    assert drawn == ["import matplotlib", "val"]
    for change, figures in ((lambda: t.gate.pop(), ["gate"]), (lambda: t.bank[0].update(active=7), ["bank"]),
                            (lambda: t.steps.append({**t.steps[-1], "step": 4}), ["training"]),
                            (lambda: t.train.pop(), ["training"]),
                            (lambda: t.timeline[-1].update(end_t=999.0), ["timeline"]),
                            (lambda: t.restarts.clear(), ["timeline"]),
                            (lambda: setattr(t, "rounds", 3), ["training", "timeline"]),
                            (lambda: t.gpu[-1].update(wall_s=1.0), ["gpu"]),
                            (lambda: setattr(t, "gpu_idle_frac", 0.5), ["gpu"]),
                            (lambda: t.notes.append("more"), []), (lambda: setattr(t, "nodes", 4), [])):
        drawn.clear()
        change()
        plots.draw_all(t, 2, out, mpl)
        assert drawn == (["import matplotlib", *figures] if figures else []), figures
    drawn.clear()
    plots.draw_all(t, 3, out, mpl)  # steps per round: the training figure's round boundaries
    assert drawn == ["import matplotlib", "training"]

    drawn.clear()
    (out / "bank.png").write_bytes((out / "bank.png").read_bytes()[:-12])  # torn (no IEND): drawn again
    (out / "gate.png").unlink()
    plots.draw_all(t, 3, out, mpl)
    assert drawn == ["import matplotlib", "gate", "bank"]

    drawn.clear()
    monkeypatch.setattr(plots, "_code_version", lambda: "another toolkit")  # the drawing code changed: all
    plots.draw_all(t, 3, out, mpl)
    assert drawn == ["import matplotlib", *FIGURES]
    assert tuple(plots.FIGURES) == FIGURES


def test_each_figure_reads_only_the_tables_its_key_covers(tmp_path):
    """A figure drawn from its view (the tables FIGURES names, the others empty) is the figure drawn
    from everything: what the cache's key leaves out cannot change a figure."""
    t = _full_tables()
    plt = plots._plt(tmp_path / "mpl")
    for name in plots.FIGURES:
        full = plots._draw(name, plt, t, 2, tmp_path / f"{name}-full.png", "k")
        only = plots._draw(name, plt, plots.view(name, t), 2, tmp_path / f"{name}-view.png", "k")
        assert full.read_bytes() == only.read_bytes(), name
        assert plots.stored_key(full) == "k", name


def test_a_wandb_history_is_inspected_again_only_when_its_run_changed(tmp_path, monkeypatch):
    """`wandb leet inspect` (a python importing wandb) runs once per offline run and change of its
    .wandb file; a failed inspection is not kept."""
    import json
    import subprocess

    run = tmp_path / "wandb" / "offline-run-1-abc"
    run.mkdir(parents=True)
    (run / "run-abc.wandb").write_bytes(b"x" * 10)
    inspected, rc = [], [0]

    def fake_run(argv, **kw):
        inspected.append(argv[-1])
        line = json.dumps({"type": "history", "history": {"item": {"train/step": len(inspected), "train/loss": 0.5}}})
        return subprocess.CompletedProcess(argv, rc[0], stdout=line + "\nnot json\n", stderr="")

    monkeypatch.setattr(data.subprocess, "run", fake_run)
    cache = tmp_path / "cache"
    first = data._wandb_history(run, cache)
    assert first == [{"train/step": 1, "train/loss": 0.5}] and len(inspected) == 1
    assert data._wandb_history(run, cache) == first and len(inspected) == 1  # unchanged: from the cache
    with open(run / "run-abc.wandb", "ab") as fh:  # the job logged more
        fh.write(b"y")
    assert data._wandb_history(run, cache) == [{"train/step": 2, "train/loss": 0.5}] and len(inspected) == 2
    with open(run / "run-abc.wandb", "ab") as fh:
        fh.write(b"z")
    rc[0] = 1
    data._wandb_history(run, cache)
    data._wandb_history(run, cache)
    assert len(inspected) == 4  # a failed inspection is not cached
    assert data._wandb_history(run, None) and len(inspected) == 5  # no cache dir: always inspected


def test_the_report_is_drawn_in_the_background_after_each_round_but_the_last(monkeypatch):
    """After the last round the run's end writes the report seconds later (and stopped the
    background one, its drawing thrown away): only the earlier rounds start one."""
    from types import SimpleNamespace

    from pyhelpers.launch import services
    from pyhelpers.loop import loop

    started, sent = [], []
    monkeypatch.setattr(services, "run_in_background", lambda cfg, lay, name: started.append(name))
    fake = SimpleNamespace(cfg=SimpleNamespace(ROUNDS=3), lay=None, _round_headline=lambda r: f"round {r}",
                           notifier=SimpleNamespace(send=lambda kind, text, round: sent.append(round)))
    for r in range(3):
        loop.Loop.round_done(fake, r)
    assert sent == [0, 1, 2] and started == ["report", "report"]


def test_a_table_without_rows_is_written_with_its_header(tmp_path):
    """restarts.csv of a run without restarts held the word "empty" and no header: a CSV reader then
    sees a column named `empty`. Every table has its columns, rows or not."""
    import csv

    t = data.Tables(1)
    for name in data.COLUMNS:
        path = data.write_csv(tmp_path / f"{name}.csv", getattr(t, name), data.COLUMNS[name])
        with open(path, newline="") as fh:
            assert list(csv.reader(fh)) == [list(data.COLUMNS[name])], name
    assert data.COLUMNS["restarts"] == ("at", "t", "kind", "round", "stage", "cause", "detail")


def test_the_page_of_a_rehearsal_says_it_ran_on_stand_ins_not_on_gpus(tmp_path):
    t = _tables(baseline=False)
    t.nodes, t.gpus_per_node = 1, 4
    assert "2 round(s) on 1 node(s) of 4 GPU(s)" in _page(tmp_path, t)
    t.rehearsal = True
    head = _page(tmp_path, t).split("<h2>")[0]
    assert "GPU(s)" not in head and "a rehearsal: the toolkit on stand-ins, on the CPU" in head, head
