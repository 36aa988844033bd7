"""slime's per-step hook: `--rollout-function-path pyhelpers.rollout.rollout.generate_rollout`.

slime's RolloutManager calls `generate_rollout(args, rollout_id, data_source, evaluation=False)`
once per step (via slime.rollout.base_types.call_rollout_fn) and logs the returned
`RolloutFnTrainOutput.metrics` with its own rollout/* figures on `rollout/step`
(slime.observability.rollout_metrics.log_rollout_data). This wrapper:

1. checks the round's plugin settings (a bad slime.yaml fails the first step, before any episode),
   those of the rollout's own round (settings.for_rollout: a one-job mode's job spans rounds) and
   that its bank is there (bank_wait.py: a round the job moved to waits for inject's, bounded);
2. opens the step's metrics (`metrics.begin`): generate calls add their episodes to it, and the
   spool record ids take the step's rollout id from it;
3. runs slime's own `slime.rollout.sglang_rollout.generate_rollout` unchanged: over-sampling,
   the dynamic-sampling filter (ours: groups.keep_group), the abort of the rest, all slime's, with
   our generate per Sample; the data source it gets counts the groups the step draws (slime's loop
   takes `data_source.get_samples`, slime 624b824 slime/rollout/sglang_rollout.py:646), which
   the filter's draw limit and rollout/shopsim/groups_* read;
4. drains the step's full-skill retries on slime's event loop (retry.drain), even when slime's
   loop raised -- then the step is abandoned (it replays after a resume): unfinished retries are
   cancelled at once and write no record, so the replay's complete records win;
   then (a completed step) aborts what is left of them on the engines and waits until every
   engine is idle (engines.py): slime releases the engines' memory right after we return;
5. records the data source's position (data_state.py; at a job's first step it puts back a
   position slime lost when it was killed between its tracker and its data-state file);
6. adds rollout/shopsim/* to the output's metrics and appends them to rollout_metrics.jsonl.
Evaluation calls go straight to slime's function (the toolkit's val/gate run outside slime).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pyhelpers.jsonfiles import load_json_or_none, write_json_atomic
from pyhelpers.procs import procfs
from pyhelpers.rollout import (
    bank_wait,
    data_state,
    engines,
    groups,
    metrics,
    retry,
    runtime,
    settings,
    slime_compat,
)
from pyhelpers.run.layout import RoundFiles


def generate_rollout(args: Any, rollout_id: int, data_source: Any, evaluation: bool = False) -> Any:
    default = slime_compat.default_generate_rollout()
    if evaluation:
        return default(args, rollout_id, data_source, evaluation=True)
    job = settings.from_args(args)
    s = job.for_rollout(int(rollout_id))
    bank_wait.bank_of_round(job, s)  # before the round's markers: a job past its round waits for inject's
    _mark_started(s, int(rollout_id))
    step = metrics.begin(int(rollout_id))
    data_state.restore(args, int(rollout_id), data_source)
    try:
        output = default(args, rollout_id, _Counted(data_source, step), evaluation=False)
    except BaseException:  # SystemExit too: Ray's SIGTERM handler raises it when the job is stopped
        step.abandoned = True
        raise
    finally:
        slime_compat.run_on_slime_loop(_finish(step, s.retry_drain_timeout_s, runtime.router_url(args)))
    data_state.record(args, int(rollout_id), data_source)
    batch = output.samples if hasattr(output, "samples") else output
    step.groups_kept = len(batch)
    step.groups_kept_equal = sum(not groups.varied(args, g) for g in batch)
    figures = metrics.summarize(step)
    metrics.append_jsonl(s.metrics_path, s.round, rollout_id=int(rollout_id), metrics=figures)
    if not hasattr(output, "metrics"):  # a legacy bare list of groups
        return slime_compat.train_output(output, figures)
    output.metrics = {**(output.metrics or {}), **figures}
    return output


class _Counted:
    """slime's data source, counting in the step the groups handed out (buffer refills included)."""

    def __init__(self, inner: Any, step: metrics.Step):
        self._inner, self._step = inner, step

    def get_samples(self, num_samples: int) -> list:
        drawn = self._inner.get_samples(num_samples)
        self._step.groups_drawn += len(drawn)
        return drawn

    def __getattr__(self, name: str) -> Any:  # add_samples (aborted partial groups go back)
        return getattr(self._inner, name)


def _mark_started(s: settings.PluginSettings, rollout_id: int) -> None:
    """The job is placed and its engines answer: the training loop's placement deadline
    (JOB_START_TIMEOUT, pyhelpers/launch/rayjob.py) waits for this file."""
    files = RoundFiles(Path(s.round_dir))
    marker = files.started_marker
    if not marker.exists():
        marker.write_text(f"{rollout_id}\n", encoding="utf-8")
    # The process the plugin runs in (slime's RolloutManager actor): the train stage waits for it
    # to be gone before it frees the ShopSimulator slots a stopped job left taken.

    pid = os.getpid()
    here = files.plugin_process
    if (load_json_or_none(here) or {}).get("pid") != pid:
        # boot_id: on a multi-node run this actor may be on a worker, where the head cannot see its pid
        write_json_atomic(here, {"pid": pid, "ticks": procfs.start_ticks(pid), "boot_id": procfs.boot_id()})


async def _finish(step: metrics.Step, timeout: float, router: str) -> None:
    await retry.drain(runtime.current(), step, timeout)
    if not step.abandoned:  # an abandoned step's job is going down with its engines
        await engines.abort_until_idle(router)
