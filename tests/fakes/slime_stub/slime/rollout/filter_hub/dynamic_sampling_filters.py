"""slime.rollout.filter_hub.dynamic_sampling_filters (torch's unbiased std -> statistics.stdev)."""

import statistics

from slime.rollout.filter_hub.base_types import DynamicFilterOutput


def check_reward_nonzero_std(args, samples, **kwargs):
    rewards = [float(s.get_reward_value(args)) for s in samples]
    keep = len(rewards) > 1 and statistics.stdev(rewards) > 1e-6
    return DynamicFilterOutput(keep=keep, reason=None if keep else f"zero_std_{round(rewards[0], 1)}")


def check_reward_nonzero_std_with_fallback(args, samples, **kwargs):
    output = check_reward_nonzero_std(args, samples, **kwargs)
    output.keep_when_insufficient = True
    return output
