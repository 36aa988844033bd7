"""What slime does with a step's samples before training, in miniature (stand-in only module).

Real slime does this inside RolloutManager (slime 624b824, slime/ray/rollout.py) and the
Megatron actor (slime/backends/megatron_utils/loss.py); the stand-in has neither a Megatron
actor nor torch, so the same rules live here, called by train.py after every rollout:

- `post_process_rewards(args, samples)`: rollout.py:608-633. --custom-reward-post-process-path
  when given, returning (raw_rewards, rewards); else for grpo/gspo/cispo/
  reinforce_plus_plus_baseline with rewards normalisation on (default; off with
  --disable-rewards-normalization): rewards reshaped to rows of n_samples_per_prompt when the
  count is n_samples_per_prompt x rollout_batch_size, else one row of all; row mean subtracted;
  for grpo/gspo/cispo with std normalisation on (default; --disable-grpo-std-normalization),
  divided by (row std + 1e-6), torch's unbiased std (NaN for a row of one, as torch gives).
- `convert_samples_to_train_data(args, samples)`: rollout.py:635-683 -- the lengths asserted,
  remove_sample zeroes the loss mask (rollout.py:680-681).
- `advantages(args, train_data)`: loss.py:763-767 with utils/ppo_utils.py:361-368: for
  grpo/gspo/cispo the advantage of every response token is the sample's post-processed reward.
"""

import math

from slime.utils.misc import load_function

GROUP_NORMALIZED = ("grpo", "gspo", "cispo", "reinforce_plus_plus_baseline")
STD_NORMALIZED = ("grpo", "gspo", "cispo")


def _std(row):
    if len(row) < 2:
        return math.nan
    mean = sum(row) / len(row)
    return math.sqrt(sum((x - mean) ** 2 for x in row) / (len(row) - 1))


def post_process_rewards(args, samples):
    custom = getattr(args, "custom_reward_post_process_path", None)
    if custom:
        return load_function(custom)(args, samples)
    raw = [s.get_reward_value(args) for s in samples]
    estimator = getattr(args, "advantage_estimator", "grpo")
    if estimator not in GROUP_NORMALIZED or not getattr(args, "rewards_normalization", True):
        return raw, raw
    n = args.n_samples_per_prompt
    width = n if len(raw) == n * args.rollout_batch_size else len(raw)
    out = []
    for start in range(0, len(raw), width):
        row = [float(x) for x in raw[start:start + width]]
        mean = sum(row) / len(row)
        row = [x - mean for x in row]
        if estimator in STD_NORMALIZED and getattr(args, "grpo_std_normalization", True):
            std = _std(row)
            row = [x / (std + 1e-6) for x in row]
        out += row
    return raw, out


def convert_samples_to_train_data(args, samples):
    raw, rewards = post_process_rewards(args, samples)
    assert len(raw) == len(samples) and len(rewards) == len(samples)
    loss_masks = []
    for s in samples:
        if s.loss_mask is None:
            s.loss_mask = [1] * s.response_length
        assert len(s.loss_mask) == s.response_length, (
            f"loss mask length {len(s.loss_mask)} != response length {s.response_length}")
        if s.remove_sample:
            s.loss_mask = [0] * s.response_length
        loss_masks.append(s.loss_mask)
    return {"tokens": [s.tokens for s in samples], "response_lengths": [s.response_length for s in samples],
            "rewards": rewards, "raw_reward": raw, "loss_masks": loss_masks,
            "sample_indices": [s.index for s in samples]}


def advantages(args, train_data):
    if getattr(args, "advantage_estimator", "grpo") not in STD_NORMALIZED or getattr(args, "normalize_advantages", False):
        raise NotImplementedError("slime stub: only the grpo-family advantage, without --normalize-advantages")
    return [[float(r)] * n for r, n in zip(train_data["rewards"], train_data["response_lengths"], strict=True)]
