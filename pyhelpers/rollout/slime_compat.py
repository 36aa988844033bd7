"""The few pieces of slime the plugin touches, imported lazily and in one place.

The plugin runs inside slime's RolloutManager actor, where these modules are loaded already. They
are imported only when called, so `pyhelpers.rollout.*` imports without slime (tests put the
stand-in tests/fakes/slime_stub on sys.path; the flag and settings modules need nothing).
What is used, read from slime v0.3.1 (624b824):
- slime.utils.types.Sample and Sample.Status (PENDING, COMPLETED, TRUNCATED, ABORTED, FAILED);
- slime.rollout.base_types.RolloutFnTrainOutput(samples, metrics) and RolloutFnEvalOutput(data,
  metrics) (what an eval function returns: base_types.py:14-16);
- slime.rollout.sglang_rollout.generate_rollout (the default loop we wrap) and GenerateState
  (a singleton; `.aborted` turns True when the step has enough groups and aborts the rest);
- slime.rollout.sample_hooks._current_rollout_id (the step id RolloutManager.generate sets);
- slime.utils.async_utils.run (runs a coroutine on slime's one background event loop);
- slime.rollout.filter_hub.base_types.DynamicFilterOutput(keep, reason, keep_when_insufficient)
  (what a --dynamic-sampling-filter-path function returns).
"""

from __future__ import annotations

import sys
from typing import Any


def sample_status():
    from slime.utils.types import Sample  # optional: slime exists only inside the job

    return Sample.Status


def train_output(samples: Any, metrics: dict) -> Any:
    from slime.rollout.base_types import RolloutFnTrainOutput  # optional: slime exists only inside the job

    return RolloutFnTrainOutput(samples=samples, metrics=metrics)


def filter_output(**fields: Any) -> Any:
    from slime.rollout.filter_hub.base_types import (
        DynamicFilterOutput,  # optional: slime exists only inside the job
    )

    return DynamicFilterOutput(**fields)


def default_generate_rollout():
    from slime.rollout.sglang_rollout import generate_rollout  # optional: slime exists only inside the job

    return generate_rollout


def run_on_slime_loop(coro) -> Any:
    """Run `coro` on the event loop slime runs generate functions on, and wait for it."""
    from slime.utils.async_utils import run  # optional: slime exists only inside the job

    return run(coro)


def step_aborted(args: Any) -> bool:
    """True once slime has aborted the rest of this step (over-sampled episodes are not needed).
    Read from the GenerateState singleton only when slime's rollout module is loaded."""
    mod = sys.modules.get("slime.rollout.sglang_rollout")
    if mod is None:
        return False
    return bool(getattr(mod.GenerateState(args), "aborted", False))


def current_rollout_id() -> int | None:
    """The step id slime's RolloutManager set before calling the rollout function, if any."""
    mod = sys.modules.get("slime.rollout.sample_hooks")
    value = getattr(mod, "_current_rollout_id", None) if mod is not None else None
    return int(value) if value is not None else None


def eval_output(data: dict, metrics: dict) -> Any:
    from slime.rollout.base_types import RolloutFnEvalOutput  # optional: slime exists only inside the job

    return RolloutFnEvalOutput(data=data, metrics=metrics)
