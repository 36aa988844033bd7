"""slime.rollout.filter_hub.base_types: the dynamic-sampling filter's output and drop counter."""

from collections import defaultdict
from dataclasses import dataclass


@dataclass
class DynamicFilterOutput:
    keep: bool
    reason: str | None = None
    keep_when_insufficient: bool = False


def should_drop_dynamic_filter_output(output, *, remaining_batch_size, target_data_size) -> bool:
    if output.keep:
        return False
    return not (output.keep_when_insufficient and remaining_batch_size <= target_data_size)


def call_dynamic_filter(fn, *args, **kwargs):
    if fn is None:
        return DynamicFilterOutput(keep=True)
    output = fn(*args, **kwargs)
    return output if isinstance(output, DynamicFilterOutput) else DynamicFilterOutput(keep=output)


class MetricGatherer:
    def __init__(self):
        self._drops = defaultdict(int)

    def on_dynamic_filter_drop(self, reason):
        if reason:
            self._drops[reason] += 1

    def collect(self):
        return {f"rollout/dynamic_filter/drop_{r}": n for r, n in self._drops.items()}
