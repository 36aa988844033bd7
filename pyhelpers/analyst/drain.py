"""The analyst's drain of round r, in a thread of the loop's process: the train stage starts it as
its job ends (beside the export: network-bound, it overlaps the CPU-bound conversion), the compile
stage waits for it before it merges the candidates. The drain is resumable (the analyst's ledger):
if the loop dies in between, the next compile drains what is left. No W&B here: `pyhelpers run
log-wandb` logs the final counters. Its failures are logged and never stop the round.

The running drains are this module's own state -- one loop process runs one run -- keyed by the
run's dir and the round: neither stage holds the other's thread, and the loop holds neither.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from pyhelpers.analyst import logs
from pyhelpers.config.load import Config
from pyhelpers.run.layout import RunLayout

Echo = Callable[[str], None]

_running: dict[tuple[Path, int], threading.Thread] = {}
_lock = threading.Lock()


def start(cfg: Config, lay: RunLayout, r: int, echo: Echo) -> None:
    """After round r's job: drain what the analyst has not analysed yet, in a thread (see wait)."""
    thread = _thread(cfg, lay, r, echo)
    with _lock:
        _running[(lay.run_dir, r)] = thread


def wait(cfg: Config, lay: RunLayout, r: int, echo: Echo) -> None:
    """Before compile: let round r's drain (started by start) finish (ANALYST_DRAIN_TIMEOUT + a
    minute); when none runs but records are pending (a resumed round), drain now. Never fails."""
    if not cfg.ANALYST_ENABLED:
        return
    with _lock:
        t = _running.pop((lay.run_dir, r), None)
    if t is None:
        # local: `make status`/`plan` import the stages, which import this; requests costs ~0.15 s
        from pyhelpers.analyst import sidecar

        pending = sidecar.status(sidecar.Settings.from_config(cfg, lay.round_dir(r), r))["records_pending"]
        if not pending:
            return
        echo(f"{pending} spool record(s) not analysed yet: draining the Failure Analyst first")
        t = _thread(cfg, lay, r, echo)
    t.join(timeout=cfg.ANALYST_DRAIN_TIMEOUT + 60)
    if t.is_alive():
        echo("the analyst drain overran ANALYST_DRAIN_TIMEOUT; compiling what it wrote (the rest is not used)")


def _thread(cfg: Config, lay: RunLayout, r: int, echo: Echo) -> threading.Thread:
    def drain():
        from pyhelpers.analyst import sidecar  # local: as in wait (requests)

        key = cfg.DASHSCOPE_API_KEY
        if not key:
            echo("analyst drain skipped: DASHSCOPE_API_KEY is not set")
            return
        logs.setup(key)
        try:
            out = sidecar.run(sidecar.Settings.from_config(cfg, lay.round_dir(r), r), key, threading.Event(),
                              drain=True)
            echo(f"analyst drain of round {r}: {out.why}, {out.left} record(s) left")
        except Exception as exc:  # noqa: BLE001 - the analyst never stops training
            echo(f"analyst drain of round {r} failed: {type(exc).__name__}: {exc} (compiling what it wrote)")
    t = threading.Thread(target=drain, daemon=True, name=f"analyst-drain-r{r}")
    t.start()
    return t
