"""The one-job mode's hand-over between rounds inside one slime job (docs/one-job-mode.md).

slime calls the rollout function for round r+1's first rollout right after round r's eval hook
returns (slime 624b824 train.py:90-91, then 53 of the next iteration); the driver injects round
r+1's bank only once it has read that round's gate. So the rollout function of a round the job
moved to (settings.for_rollout) waits for that bank, bounded by BANK_WAIT_TIMEOUT, and records
the wait in the run's events.jsonl: `bank-wait` when it starts (a watcher shows a job holding its
GPUs for the driver), `bank-in` with the seconds waited. The job's own round (today's order: one
job per round, its bank written before the job starts) is never waited for.
"""

from __future__ import annotations

import time
from pathlib import Path

from pyhelpers.errors import ToolkitError
from pyhelpers.rollout import runtime
from pyhelpers.rollout.settings import PluginSettings
from pyhelpers.run import events
from pyhelpers.run.layout import RoundFiles


def wait_for_file(path: Path, bound_s: float, poll_s: float = 1.0) -> bool:
    """Whether `path` exists within bound_s (polled: the writer is another process, on any node)."""
    deadline = time.monotonic() + bound_s
    while not Path(path).is_file():
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


def bank_of_round(job: PluginSettings, s: PluginSettings, poll_s: float = 1.0) -> None:
    """Return once round s.round's bank is there: at once for the job's own round (`job`, the YAML's),
    after a bounded, recorded wait for a round the job moved to."""
    if s is job or not s.bank_path or Path(s.bank_path).is_file():
        runtime.require_bank(s.bank_path)
        return
    run_dir = RoundFiles(Path(s.round_dir)).run_dir
    events.append(run_dir, "bank-wait", round=s.round, path=s.bank_path, timeout_s=s.bank_wait_timeout)
    t0 = time.monotonic()
    if not wait_for_file(Path(s.bank_path), s.bank_wait_timeout, poll_s):
        raise ToolkitError(f"round {s.round}'s skill bank did not come within {s.bank_wait_timeout:g} s "
                           "(BANK_WAIT_TIMEOUT) of its first rollout", s.bank_path,
                           "see why the driver did not inject it (its log, `make status`); `make resume` "
                           "goes on from the round's checkpoint")
    events.append(run_dir, "bank-in", round=s.round, waited_s=round(time.monotonic() - t0, 3))
