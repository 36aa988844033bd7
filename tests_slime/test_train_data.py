"""What slime would train on from the plugin's steps (issue 42): slime's own
_convert_samples_to_train_data (tests_slime/call_sites.py) on the samples the lane's job saved with
`--save-debug-rollout-data` (rollout-only mode skips the conversion, slime/ray/rollout.py:507-509),
with slime's args parsed from the job's own argv: the plugin's `normalized_rewards` and `keep_group`
as the plan passes them. And the contract broken on purpose: the failure names slime's call site."""

from __future__ import annotations

from argparse import Namespace

import pytest
import torch
from call_sites import SlimeRefused, train_data
from plan import slime_args
from rollout_job import FIRST, Job

from pyhelpers.rollout import flags as plugin

EPS = 1e-6  # slime's GRPO std epsilon (rollout.py:629)


def _samples(job: Job, rollout_id: int) -> list:
    from slime.observability.rollout_data_utils import load_debug_rollout_data

    return load_debug_rollout_data(job.debug, rollout_id=rollout_id)  # slime's own reader of the saved step


def _trained(sample) -> bool:
    """slime trains on a sample unless the plugin removed it (FAILED/ABORTED episodes: generate.py)."""
    from slime.utils.types import Sample

    return not sample.remove_sample and sample.status not in (Sample.Status.FAILED, Sample.Status.ABORTED)


def _group_advantages(group: list) -> list[float]:
    """GRPO over the group's trained episodes (mean, unbiased std as torch's), 0 for a removed one:
    the rule docs/training.md ("Removed episodes") gives normalized_rewards."""
    kept = torch.tensor([s.reward for s in group if _trained(s)], dtype=torch.float)
    if len(kept) == 0:
        return [0.0] * len(group)
    std = kept.std() if len(kept) > 1 else torch.tensor(0.0)
    return [float((s.reward - kept.mean()) / (std + EPS)) if _trained(s) else 0.0 for s in group]


def _metrics(job: Job, rollout_id: int) -> dict:
    import json

    lines = [json.loads(line) for line in job.lay.rollout_metrics(0).read_text().splitlines()]
    return next(m["metrics"] for m in lines if m["rollout_id"] == rollout_id)


@pytest.mark.parametrize("rollout_id", range(FIRST))
def test_slime_trains_on_the_plugins_groups_with_grpo_advantages(job: Job, monkeypatch, sm80, rollout_id):
    assert job.first.rc == 0
    args = slime_args(job.cfg, job.argv, monkeypatch)
    assert (args.custom_reward_post_process_path, args.dynamic_sampling_filter_path) == (
        plugin.REWARD_POST_PROCESS, plugin.DYNAMIC_FILTER)
    saved = _samples(job, rollout_id)
    data = train_data(args, _samples(job, rollout_id))
    n = args.n_samples_per_prompt

    # The kept groups: rollout_batch_size whole groups in slime's order, each one prompt's n episodes.
    groups = [saved[i:i + n] for i in range(0, len(saved), n)]
    assert len(groups) == args.rollout_batch_size and all(len(g) == n for g in groups)
    assert all(len({(s.group_index, s.label) for s in g}) == 1 for g in groups), [
        [(s.group_index, s.label) for s in g] for g in groups]
    # keep_group keeps a group whose trained rewards differ; an equal one only once the step reached
    # its draw limit (slime's keep_when_insufficient), and the plugin's metrics count those.
    equal = [g for g in groups if len({s.reward for s in g if _trained(s)}) < 2]
    figures = _metrics(job, rollout_id)
    assert len(equal) == figures["rollout/shopsim/groups_kept_equal"]
    assert not equal or figures["rollout/shopsim/draw_limit_reached"] == 1.0

    # Advantages (slime's `rewards`, what its GRPO loss multiplies): per group over trained episodes.
    assert data["raw_reward"] == [s.reward for s in saved]
    expected = [a for g in groups for a in _group_advantages(g)]
    assert data["rewards"] == pytest.approx(expected, abs=1e-5)
    # Where the plugin removed nothing, they are exactly slime's own default GRPO (rollout.py:612-631).
    default = train_data(Namespace(**{**vars(args), "custom_reward_post_process_path": None}),
                         _samples(job, rollout_id))["rewards"]
    whole = [i for i, s in enumerate(saved) if all(_trained(x) for x in groups[i // n])]
    assert [data["rewards"][i] for i in whole] == pytest.approx([default[i] for i in whole], abs=1e-5)

    # Loss masks: one entry per response token; the plugin's mask where slime trains, zeros elsewhere.
    assert data["response_lengths"] == [s.response_length for s in saved]
    for s, mask in zip(saved, data["loss_masks"], strict=True):
        assert len(mask) == s.response_length
        assert mask == (s.loss_mask if _trained(s) else [0] * s.response_length)
    assert sum(sum(m) for m in data["loss_masks"]) > 0, "no token to train on"


def test_a_sample_without_response_length_fails_at_slimes_call_site(job: Job, monkeypatch, sm80):
    """The plugin's samples as a plugin that never sets response_length returns them (Sample's
    default 0, slime/utils/types.py:116): slime's conversion refuses them, named at its line."""
    from slime.utils.types import Sample

    assert job.first.rc == 0
    args = slime_args(job.cfg, job.argv, monkeypatch)
    broken = [Sample.from_dict({k: v for k, v in s.to_dict().items() if k != "response_length"})
              for s in _samples(job, 0)]
    with pytest.raises(SlimeRefused) as refused:
        train_data(args, broken)
    print(refused.value)
    # The loss-mask check of _convert_samples_to_train_data (rollout.py:677-679 at 624b824; Python
    # names the condition's line).
    assert "at slime/ray/rollout.py:678: AssertionError: loss mask length" in str(refused.value)
    assert "!= response length 0" in str(refused.value)
