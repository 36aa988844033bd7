"""`make report`: a run at a glance without W&B -- runs/<RUN_NAME>/report/index.html with PNG plots
and the CSVs behind them, from the run's own files (data.py: tables; plots.py: figures;
html.py: the page; build(): all of it, each file written to a temp name and renamed, the page
last, so a reader never sees a half-written report)."""

from __future__ import annotations

import time
from pathlib import Path

from pyhelpers.config.load import Config
from pyhelpers.run import events


def build(cfg: Config, lay, out: Path | None = None) -> Path:
    """Write the report of the run at `lay` into `out` (default RUN_DIR/report); returns index.html."""
    from pyhelpers.report import (  # local: plots loads matplotlib; `import pyhelpers.report` stays light
        data,
        html,
        plots,
    )

    out = Path(out or lay.run_dir / "report")
    out.mkdir(parents=True, exist_ok=True)
    tables = data.gather(cfg, lay)
    csvs = {name: data.write_csv(out / f"{name}.csv", getattr(tables, name), columns)
            for name, columns in data.COLUMNS.items()}
    pngs = plots.draw_all(tables, lay.steps_per_round, out, cache_dir=lay.run_dir / ".matplotlib")
    return html.write(out / "index.html", cfg.run_name, t=tables, pngs=pngs, csvs=csvs)


def build_timed(cfg: Config, lay, out: Path | None = None) -> tuple[Path, float]:
    """build(), its time recorded in the run's events (`report-written`): the run's ETA counts the
    report written at its end from the reports of its rounds (stages/progress.py END_OF_RUN)."""
    t0 = time.monotonic()
    page = build(cfg, lay, out)
    seconds = time.monotonic() - t0
    events.append(lay.run_dir, "report-written", seconds=round(seconds, 3))
    return page, seconds
