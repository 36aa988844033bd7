"""The lane's call-site checks: slime's own code calling the plugin where the rollout-only job
cannot reach it. When slime's code refuses what the plugin gives, SlimeRefused names where in slime
(file:line) it did, so a broken plugin contract reads as the slime call site it breaks.

- rollout_call: slime's call_rollout_fn (slime/rollout/base_types.py:19-20 at 624b824, called from
  slime/ray/rollout.py:504-592) on a rollout function's real signature (its body needs engines);
- train_data: slime's RolloutManager._convert_samples_to_train_data (rollout.py:635-760) on a
  step's samples, with the reward post-processing and conversion functions RolloutManager.__init__
  loads from the args (rollout.py:385-392). slime skips it in rollout-only mode (rollout.py:507-509),
  so the lane runs it on the samples `--save-debug-rollout-data` kept.
"""

from __future__ import annotations

import os
import traceback
from argparse import Namespace
from pathlib import Path


class SlimeRefused(AssertionError):
    """slime's conversion raised; str() names slime's frame (file:line) and the error."""


def _manager(args: Namespace):
    """A RolloutManager instance with only what the conversion reads (no engines, no Ray actor):
    the class under Ray's @ray.remote, its __init__'s three attributes set as __init__ sets them."""
    from slime.ray.rollout import RolloutManager
    from slime.utils.misc import load_function

    cls = RolloutManager.__ray_actor_class__  # the class under @ray.remote
    manager = cls.__new__(cls)
    manager.args = args
    paths = (args.custom_reward_post_process_path, args.custom_convert_samples_to_train_data_path)
    manager.custom_reward_post_process_func, manager.custom_convert_samples_to_train_data_func = (
        load_function(p) if p is not None else None for p in paths)
    return manager


def slime_frame(exc: BaseException) -> str:
    """The innermost frame of the traceback inside SHOPSIMRL_SLIME_DIR, as `slime/...py:LINE`."""
    root = Path(os.environ["SHOPSIMRL_SLIME_DIR"]).resolve()
    inside = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve().is_relative_to(root)]
    if not inside:
        return "no slime frame"
    f = inside[-1]
    return f"{Path(f.filename).resolve().relative_to(root)}:{f.lineno}"


def rollout_call(path: str, evaluation: bool):
    """slime's call_rollout_fn calling the function at dotted `path` as RolloutManager does (args,
    rollout_id, data_source, evaluation=...): a probe with that function's signature binds the call
    as the function itself would, so a renamed or missing parameter fails inside slime's call site."""
    import inspect

    from slime.rollout.base_types import RolloutFnTrainOutput, call_rollout_fn
    from slime.utils.misc import load_function

    signature = inspect.signature(load_function(path))

    def probe(*args, **kwargs):
        signature.bind(*args, **kwargs)  # the TypeError the function itself would raise
        return RolloutFnTrainOutput(samples=[])

    try:
        return call_rollout_fn(probe, object(), 0, object(), evaluation=evaluation)
    except TypeError as exc:
        raise SlimeRefused(f"slime's call of {path} failed at {slime_frame(exc)}: {exc}") from exc


def train_data(args: Namespace, samples: list) -> dict:
    """slime's train data for `samples` (a step's flattened list, as RolloutManager.generate has it)."""
    manager = _manager(args)
    try:
        return manager._convert_samples_to_train_data(samples)
    except Exception as exc:
        raise SlimeRefused(f"slime refused the plugin's samples at {slime_frame(exc)}: "
                           f"{type(exc).__name__}: {exc}") from exc
