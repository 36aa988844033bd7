"""What slime does with a group of episodes, restricted to the episodes it trains on.

Two hooks slime calls by dotted path (pyhelpers/rollout/flags.py passes both):

- `keep_group`: `--dynamic-sampling-filter-path`. slime's check_reward_nonzero_std
  (slime 624b824, slime/rollout/filter_hub/dynamic_sampling_filters.py:9-15) keeps a group whose
  rewards are not all equal, and slime's loop (slime/rollout/sglang_rollout.py:407-436) draws
  another OVER_SAMPLING_GROUPS groups whenever too few are left -- with no bound. With REWARD=strict
  an early policy fails nearly every episode, so nearly every group is all-zero and one step can
  play thousands of episodes or never end. This filter applies the same test, and once one more
  draw would take the step past its limit (DRAW_LIMIT_FACTOR x ROLLOUT_GROUPS groups) it sets
  slime's own `keep_when_insufficient` (filter_hub/base_types.py:14-24): slime then keeps
  equal-reward groups when it would otherwise run short, and never draws again.
- `normalized_rewards`: `--custom-reward-post-process-path` (slime/ray/rollout.py:608-610). slime's
  default (rollout.py:612-631) subtracts the group mean and divides by the group std over all
  n_samples_per_prompt rewards; FAILED/ABORTED episodes (infra errors, timeouts, slime's abort)
  carry reward 0.0 there although slime never trains on them (rollout.py:680-681 only zeroes
  their loss mask), so one ShopSimulator hiccup shifts every advantage of its group. Here the
  statistics use only the episodes slime trains on; a removed one gets 0.0.

Both read a sample as "trained on" exactly as slime's loss does: not `remove_sample`, and not
FAILED/ABORTED. Stdlib only (the stand-in slime has no torch); std is the unbiased one torch uses.
"""

from __future__ import annotations

import math
from typing import Any

from pyhelpers.rollout import metrics, settings, slime_compat

GRPO_FAMILY = ("grpo", "gspo", "cispo")                           # rollout.py:627 (std division)
GROUP_NORMALIZED = (*GRPO_FAMILY, "reinforce_plus_plus_baseline")  # rollout.py:614 (mean subtraction)
EPS = 1e-6  # rollout.py:629 and dynamic_sampling_filters.py:11


def trained(sample: Any) -> bool:
    """True when slime trains on this sample (its loss mask is not zeroed)."""
    status = slime_compat.sample_status()
    return not getattr(sample, "remove_sample", False) and sample.status not in (status.FAILED, status.ABORTED)


def _std(values: list[float]) -> float:
    """Unbiased standard deviation (torch.Tensor.std's default); 0.0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def trained_rewards(args: Any, group: list) -> list[float]:
    return [float(s.get_reward_value(args)) for s in group if trained(s)]


def varied(args: Any, group: list) -> bool:
    """The group teaches something: its trained episodes' rewards are not all equal."""
    return _std(trained_rewards(args, group)) > EPS


def keep_group(args: Any, samples: list, **_: Any) -> Any:
    """slime's dynamic-sampling filter: keep a group whose trained episodes' rewards differ."""
    rewards = trained_rewards(args, samples)
    keep = _std(rewards) > EPS  # varied(), on the rewards already in hand
    reason = None if keep else ("all_removed" if not rewards else f"zero_std_{round(rewards[0], 1)}")
    step = metrics.current(slime_compat.current_rollout_id())
    # slime draws OVER_SAMPLING_GROUPS more whenever a drop leaves too few: allow that draw only
    # while the step stays within its limit; past it, slime keeps rejected groups instead.
    fallback = step.groups_drawn + over_sampling(args) > draw_limit(args)
    step.draw_limit_reached |= fallback and not keep
    return slime_compat.filter_output(keep=keep, reason=reason, keep_when_insufficient=fallback)


def over_sampling(args: Any) -> int:
    """Groups slime draws at a time (--over-sampling-batch-size, else --rollout-batch-size)."""
    return int(getattr(args, "over_sampling_batch_size", None) or args.rollout_batch_size)


def draw_limit(args: Any) -> int:
    """The most groups one step may draw: DRAW_LIMIT_FACTOR x ROLLOUT_GROUPS, never below one draw."""
    return max(settings.from_args(args).draw_limit_factor * int(args.rollout_batch_size), over_sampling(args))


def normalized_rewards(args: Any, samples: list) -> tuple[list[float], list[float]]:
    """slime's reward post-processing (raw rewards, rewards used as advantages), with each group's
    mean and std over its trained episodes only; removed episodes get 0.0."""
    raw = [float(s.get_reward_value(args)) for s in samples]
    if args.advantage_estimator not in GROUP_NORMALIZED or not getattr(args, "rewards_normalization", True):
        return raw, list(raw)
    n = int(args.n_samples_per_prompt)
    if len(samples) % n:
        raise ValueError(f"{len(samples)} samples are not whole groups of --n-samples-per-prompt {n}")
    divide = args.advantage_estimator in GRPO_FAMILY and getattr(args, "grpo_std_normalization", True)
    out: list[float] = []
    for start in range(0, len(samples), n):
        group = samples[start:start + n]
        kept = [r for s, r in zip(group, raw[start:start + n], strict=True) if trained(s)]
        mean = sum(kept) / len(kept) if kept else 0.0
        std = _std(kept)
        for s, r in zip(group, raw[start:start + n], strict=True):
            adv = (r - mean) / (std + EPS) if divide else r - mean
            out.append(adv if trained(s) else 0.0)
    return raw, out
