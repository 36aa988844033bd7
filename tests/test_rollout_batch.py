"""What slime builds a training batch from, through its stand-in (tests/fakes/slime_stub) and the
flags the training loop passes it (issue 19 items 1-3): task prompts slime's Dataset accepts for a
model with a processor, a dynamic-sampling step that ends when every group is all-equal, and GRPO
group statistics over the episodes slime trains on only."""

from __future__ import annotations

import asyncio
import copy
import json
import statistics
from argparse import Namespace

import pytest
from conftest import run_pyhelpers
from fakes.shop_fixture import write_shop_fixture
from support.rollout_stack import (
    Stack,
    assert_aligned,
    free_port,
    fresh_slime_singletons,
    sampling_params,
    use_slime_stub,
)
from support.tokenizer import build_tokenizer

from pyhelpers.config import load
from pyhelpers.launch import slime_args
from pyhelpers.rollout import flags, metrics, runtime

use_slime_stub()
from slime.ray.train_data import advantages, convert_samples_to_train_data  # noqa: E402  (the stand-in)
from slime.rollout.base_types import call_rollout_fn  # noqa: E402
from slime.rollout.data_source import RolloutDataSourceWithBuffer  # noqa: E402
from slime.rollout.sample_hooks import set_current_rollout_id  # noqa: E402
from slime.utils.misc import load_function  # noqa: E402
from slime.utils.types import Sample  # noqa: E402

pytestmark = pytest.mark.heavy  # the rollout plugin against fake SGLang, router and ShopSimulator processes


def toolkit_flags(env: dict) -> dict:
    """Flag -> value of the slime command line the training loop builds (a bare flag -> True)."""
    from pyhelpers.run.layout import from_config

    cfg = load.load(env)
    argv = slime_args.slime_train(cfg, from_config(cfg), 0, flags.plugin_flags())
    out = {}
    for i, arg in enumerate(argv):
        if arg.startswith("--"):
            nxt = argv[i + 1] if i + 1 < len(argv) else "--"
            out[arg] = True if nxt.startswith("--") else nxt
    return out


def slime_parser_defaults(toolkit: dict) -> dict:
    """What slime's parser sets for the options below when the loop passes the flags it does."""
    return dict(advantage_estimator=toolkit.get("--advantage-estimator", "grpo"),
                rewards_normalization="--disable-rewards-normalization" not in toolkit,
                grpo_std_normalization="--disable-grpo-std-normalization" not in toolkit,
                dynamic_sampling_filter_path=toolkit.get("--dynamic-sampling-filter-path"),
                custom_reward_post_process_path=toolkit.get("--custom-reward-post-process-path"))


def play(args, samples: list) -> list:
    """Our generate on each sample, on one event loop (slime's per-sample hook, no slime loop)."""
    from pyhelpers.rollout.generate import generate

    async def main():
        metrics.begin(0)
        try:
            return list(await asyncio.gather(*(generate(args, s, sampling_params(args)) for s in samples)))
        finally:
            await runtime.close_all()

    return asyncio.run(main())


def fresh(label: str, n: int, start: int = 0) -> list:
    return [Sample(group_index=0, index=start + i, prompt="", label=label) for i in range(n)]


# ----------------------------------------------------------------------------- item 1: prompts

def test_slime_reads_the_built_task_files_for_a_model_with_a_processor(toolkit_env, tmp_path):
    fx = write_shop_fixture(tmp_path / "shop", n_tasks=6, n_eval=2, seed=3)
    r = run_pyhelpers(["data", "build", "--source", str(fx["eval_file"]), "--source", str(fx["train_file"]),
                       "--server-file", str(fx["server_file"]), "--out-dir", str(tmp_path / "data")], toolkit_env)
    assert r.returncode == 0, r.stdout + r.stderr
    toolkit = toolkit_flags(toolkit_env)
    args = Namespace(prompt_data=str(tmp_path / "data" / "train.jsonl"),
                     hf_checkpoint=str(build_tokenizer(tmp_path / "Qwen3.5-4B")),  # has a processor
                     input_key=toolkit.get("--input-key", "input"), label_key=toolkit.get("--label-key"),
                     metadata_key=toolkit.get("--metadata-key", "metadata"),
                     apply_chat_template=bool(toolkit.get("--apply-chat-template")),
                     n_samples_per_prompt=2, rollout_shuffle=False, rollout_seed=42)
    source = RolloutDataSourceWithBuffer(args)  # slime's Dataset asserts here, inside RolloutManager.__init__
    tasks = [json.loads(x) for x in (tmp_path / "data" / "train.jsonl").read_text().splitlines()]
    group = source.get_samples(1)[0]
    assert [s.label for s in group] == [tasks[0]["task_id"]] * 2
    assert group[0].prompt == [{"role": "user", "content": tasks[0]["instruction"]}]


def test_stand_in_asserts_like_slime_on_a_string_prompt_only_when_the_model_has_a_processor(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"task_id": "t1", "instruction": "买鞋"}) + "\n", encoding="utf-8")
    args = Namespace(prompt_data=str(tasks), hf_checkpoint=str(build_tokenizer(tmp_path / "vl")),
                     input_key="instruction", label_key="task_id", n_samples_per_prompt=1)
    with pytest.raises(AssertionError, match="prompt must be a list when processor is not None, got <class 'str'>"):
        RolloutDataSourceWithBuffer(args)
    args.hf_checkpoint = str(build_tokenizer(tmp_path / "text-only", processor=False))
    assert RolloutDataSourceWithBuffer(args).get_samples(1)[0][0].prompt == "买鞋"


# ----------------------------------------------------------------------------- item 2: the filter's bound

@pytest.fixture(scope="module")
def failing_stack(tmp_path_factory):
    """An early policy under REWARD=strict: every episode fails, so every group is all-zero."""
    tmp = tmp_path_factory.mktemp("failing")
    fx = write_shop_fixture(tmp / "shop", n_tasks=4, n_eval=0, base_success=0.0, seed=3)
    policy = json.loads(fx["policy"].read_text(encoding="utf-8"))
    policy["failure_modes"] = {"dawdle": 1.0}  # never buys: reward 0 whatever REWARD says
    fx["policy"].write_text(json.dumps(policy, ensure_ascii=False), encoding="utf-8")
    st = Stack(tmp, slots=12, fixture=fx, tokenizer=build_tokenizer(tmp / "tok"), sampling="episode")
    yield st
    st.close()


class Guarded:
    """slime's data source, counting the groups a step draws and refusing to stall a test forever."""

    def __init__(self, inner, most: int):
        self.inner, self.most, self.drawn = inner, most, 0

    def get_samples(self, n):
        self.drawn += n
        if self.drawn > self.most:
            raise RuntimeError(f"the step keeps drawing: {self.drawn} groups, and would never end")
        return self.inner.get_samples(n)

    def add_samples(self, samples):
        self.inner.add_samples(samples)


def test_a_step_of_all_equal_groups_ends_within_its_draw_limit(failing_stack, toolkit_env, tmp_path):
    fresh_slime_singletons()
    args = failing_stack.args(tmp_path / "round-000", concurrency=12, rollout_batch_size=2,
                              over_sampling_batch_size=2, n_samples_per_prompt=2,
                              **slime_parser_defaults(toolkit_flags(toolkit_env)))
    limit = 4 * args.rollout_batch_size  # DRAW_LIMIT_FACTOR's default
    source = Guarded(RolloutDataSourceWithBuffer(args), most=5 * limit)
    set_current_rollout_id(0)
    out = call_rollout_fn(load_function(args.rollout_function_path), args, 0, source, evaluation=False)
    assert source.drawn <= limit
    assert len(out.samples) == 2 and all(len(g) == 2 for g in out.samples)
    assert {s.reward for g in out.samples for s in g} == {0.0}  # kept anyway: no other group came
    m = out.metrics
    assert m["rollout/shopsim/groups_drawn"] == source.drawn
    assert m["rollout/shopsim/groups_kept"] == 2 and m["rollout/shopsim/groups_kept_equal"] == 2
    assert m["rollout/shopsim/keep_ratio"] == pytest.approx(2 / source.drawn)
    assert m["rollout/shopsim/draw_limit_reached"] == 1.0
    line = json.loads((tmp_path / "round-000" / "rollout_metrics.jsonl").read_text().splitlines()[-1])
    assert line["metrics"]["rollout/shopsim/groups_drawn"] == source.drawn
    assert failing_stack.slot_state()["taken"] == []


def test_training_engine_draws_each_episode_so_a_group_can_be_all_equal(tmp_path):
    """The stand-in no longer hides stalls: the training engine draws each episode on its own (the
    stub starts fake_sglang with --fake-sampling episode; no stratification over group members)."""
    fx = write_shop_fixture(tmp_path / "shop", n_tasks=2, n_eval=0, base_success=0.5, seed=3)
    st = Stack(tmp_path, slots=4, fixture=fx, tokenizer=build_tokenizer(tmp_path / "tok"), sampling="episode")
    try:
        args = st.args(tmp_path / "round-000", concurrency=4)
        label = f"t{fx['tasks'][0]['idx']:04d}"
        outcomes = [play(args, fresh(label, 1, i))[0].metadata["shopsim"]["success"] for i in range(12)]
        pairs = [tuple(outcomes[i:i + 2]) for i in range(0, 12, 2)]
        assert any(a == b for a, b in pairs) and any(a != b for a, b in pairs), outcomes
    finally:
        st.close()


# ----------------------------------------------------------------------------- item 3: removed samples

@pytest.fixture(scope="module")
def mixed_stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mixed")
    fx = write_shop_fixture(tmp / "shop", n_tasks=2, n_eval=0, base_success=0.5, seed=3)
    st = Stack(tmp, slots=12, fixture=fx, tokenizer=build_tokenizer(tmp / "tok"), sampling="episode")
    yield st
    st.close()


def test_an_infra_failure_changes_no_other_advantage_in_its_group(mixed_stack, toolkit_env, tmp_path):
    parser = slime_parser_defaults(toolkit_flags(toolkit_env))
    args = mixed_stack.args(tmp_path / "round-000", concurrency=12, n_samples_per_prompt=4, rollout_batch_size=1,
                            **parser)
    label = f"t{mixed_stack.fixture['tasks'][0]['idx']:04d}"
    played = play(args, fresh(label, 12))
    wins = [s for s in played if s.metadata["shopsim"]["success"]]
    losses = [s for s in played if not s.metadata["shopsim"]["success"]]
    assert wins and losses, "the fixture's policy both wins and loses this task"
    # ShopSimulator gone for one episode: an infra error, FAILED and removed from training
    dead = mixed_stack.args(tmp_path / "round-dead", concurrency=12, n_samples_per_prompt=4, rollout_batch_size=1,
                            yaml_extra={"shopsim_url": f"http://127.0.0.1:{free_port()}"}, **parser)
    failed = play(dead, fresh(label, 1, start=99))[0]
    assert failed.status == Sample.Status.FAILED and failed.remove_sample
    assert_aligned(failed)

    trained = [wins[0], losses[0], losses[1]]
    group = [copy.deepcopy(s) for s in trained] + [failed]
    data = convert_samples_to_train_data(args, group)
    adv = advantages(args, data)
    rewards = [s.reward for s in trained]
    mean, std = statistics.mean(rewards), statistics.stdev(rewards)
    for i, r in enumerate(rewards):  # exactly the three trained episodes' own group statistics
        assert adv[i] == pytest.approx([(r - mean) / (std + 1e-6)] * trained[i].response_length)
    assert data["loss_masks"][3] == [0] * failed.response_length  # never trained on
    assert data["raw_reward"][3] == 0.0  # still logged as slime logs it

    # the dynamic filter sees the same group: three equal trained rewards and a failure is all-equal
    keep = load_function(args.dynamic_sampling_filter_path)
    assert keep(args, [copy.deepcopy(wins[0]) for _ in range(3)] + [failed]).keep is False
    assert keep(args, group).keep is True
