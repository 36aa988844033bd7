"""slime.rollout.base_types: what a rollout function returns."""

from dataclasses import dataclass
from typing import Any

from slime.utils.types import Sample  # noqa: F401


@dataclass
class RolloutFnTrainOutput:
    samples: list
    metrics: dict[str, Any] = None


@dataclass
class RolloutFnEvalOutput:
    data: dict
    metrics: dict[str, Any] = None


def call_rollout_fn(fn, *args, evaluation: bool, **kwargs):
    output = fn(*args, **kwargs, evaluation=evaluation)
    if not isinstance(output, (RolloutFnTrainOutput, RolloutFnEvalOutput)):
        output = RolloutFnEvalOutput(data=output) if evaluation else RolloutFnTrainOutput(samples=output)
    return output
