"""The rollout plugin against the fake ShopSimulator, the fake SGLang engine behind a fake router,
slime's Sample stand-in and a tokenizer built here (issue 5)."""

from __future__ import annotations

import asyncio
import copy
import json

import pytest
from fakes.shop_fixture import write_shop_fixture
from support.rollout_stack import EVAL_KNOBS, Stack, assert_aligned, sampling_params, use_slime_stub
from support.skillbank import bank_of
from support.tokenizer import build_tokenizer

from pyhelpers import jsonfiles
from pyhelpers.errors import ToolkitError
from pyhelpers.launch.slime_flags import SLIME_TRAIN_FLAGS, check
from pyhelpers.rollout import flags, metrics, retry, runtime, settings
from pyhelpers.skills.bank import write_bank

use_slime_stub()
from slime.utils.types import Sample  # noqa: E402  (the stand-in, from tests/fakes/slime_stub)

pytestmark = pytest.mark.heavy  # the rollout plugin against fake SGLang, router and ShopSimulator processes

HELPFUL = "先选颜色再购买"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stack")
    fx = write_shop_fixture(tmp / "shop", n_tasks=8, n_eval=0, base_success=0.5,
                            effects=[{"text": HELPFUL, "delta": 0.5}], seed=3)
    st = Stack(tmp, slots=12, fixture=fx, tokenizer=build_tokenizer(tmp / "tok"))
    yield st
    st.close()


@pytest.fixture
def bank_file(tmp_path):
    bank = bank_of([("搜索结果很多时", "先核对类别再点击"), ("选择规格时", HELPFUL)], ["active", "candidate"])
    path = tmp_path / "skillbank.json"
    write_bank(path, bank)
    return path


def samples_for(stack: Stack, n_groups: int, per_group: int, start_index: int = 0) -> list[Sample]:
    out, index = [], start_index
    tasks = stack.fixture["tasks"]
    for g in range(n_groups):
        t = tasks[g % len(tasks)]
        for _ in range(per_group):
            out.append(Sample(group_index=g, index=index, prompt=t["instruction"], label=f"t{t['idx']:04d}"))
            index += 1
    return out


def run_step(args, samples, rollout_id: int) -> list:
    from pyhelpers.rollout.generate import generate

    async def main():
        step = metrics.begin(rollout_id)
        try:
            results = await asyncio.gather(*(generate(args, s, sampling_params(args)) for s in samples))
        finally:
            await retry.drain(runtime.current(), step, args.shopsimrl_retry_drain_timeout_s)
            await runtime.close_all()
        return results, step

    return asyncio.run(main())


# ----------------------------------------------------------------------------- no servers

def test_plugin_flags_are_in_the_checked_list():
    argv = flags.plugin_flags()
    assert check(argv, SLIME_TRAIN_FLAGS, "slime train.py") == argv
    assert argv == ["--rollout-function-path", "pyhelpers.rollout.rollout.generate_rollout",
                    "--custom-generate-function-path", "pyhelpers.rollout.generate.generate",
                    "--dynamic-sampling-filter-path", "pyhelpers.rollout.groups.keep_group",
                    "--custom-reward-post-process-path", "pyhelpers.rollout.groups.normalized_rewards",
                    "--input-key", "messages", "--label-key", "task_id"]
    from pyhelpers.tasks.files import SLIME_PROMPT_KEY

    assert flags.INPUT_KEY == SLIME_PROMPT_KEY  # the field `pyhelpers data build` writes


def test_settings_yaml_round_trip_and_refusals(tmp_path):
    good = dict(round=2, round_dir=str(tmp_path), bank_path="", tasks_path="t.jsonl", shopsim_url="http://x:1",
                shopsim_slots=48, shopsim_episode_concurrency=32, max_turns=20, rollout_max_context_len=24576,
                rollout_max_response_len=4096, reward="strict", retry_trains=0, skill_token_budget=1024,
                draw_limit_factor=4, **EVAL_KNOBS)
    s = settings.write_plugin_yaml(tmp_path / "slime.yaml", **good)
    assert s.spare_slots == 16
    import yaml

    doc = yaml.safe_load((tmp_path / "slime.yaml").read_text())
    assert set(doc) == set(settings.yaml_keys()) and all(k.startswith("shopsimrl_") for k in doc)
    for bad, words in [({"reward": "dense"}, "REWARD"), ({"retry_trains": 1}, "not supported"),
                       ({"shopsim_episode_concurrency": 49}, "SHOPSIM_EPISODE_CONCURRENCY"),
                       ({"max_turns": "many"}, "must be int")]:
        with pytest.raises(ToolkitError, match=words):
            settings.write_plugin_yaml(tmp_path / "bad.yaml", **{**good, **bad})
    args = type("A", (), {"rollout_max_response_len": 2048, **{f"shopsimrl_{k}": v for k, v in good.items()}})()
    with pytest.raises(ToolkitError, match="differs"):
        settings.from_args(args)


# ----------------------------------------------------------------------------- with the fakes

def test_episodes_tokens_masks_logprobs_aligned_and_slots_released(stack, tmp_path, bank_file):
    args = stack.args(tmp_path / "round-000", bank_path=bank_file)
    samples = samples_for(stack, 8, 2)
    results, step = run_step(args, samples, rollout_id=0)
    tok_builder, _ = runtime._builder(str(stack.tokenizer))
    statuses = set()
    for s in results:
        assert_aligned(s)
        meta = s.metadata["shopsim"]
        statuses.add(s.status)
        assert meta["termination"] in metrics.SCORED, meta
        assert s.remove_sample is False
        assert s.reward == pytest.approx(meta["strict"])  # REWARD=strict
        assert s.status == (Sample.Status.COMPLETED if meta["termination"] in ("done", "over")
                            else Sample.Status.TRUNCATED)
        assert meta["skills_shown"] == ["sk-f1f68f913583"]  # training sees the active view only
        prompt_len = len(s.tokens) - s.response_length
        assert s.tokens[:prompt_len] == tok_builder.encode(s.prompt)
        resp = s.tokens[prompt_len:]
        assert s.loss_mask[0] == 1 and 0 in s.loss_mask  # a policy turn first, observations masked
        assert all(lp == 0.0 for lp, m in zip(s.rollout_log_probs, s.loss_mask, strict=True) if m == 0)
        assert all(lp < 0.0 for lp, m in zip(s.rollout_log_probs, s.loss_mask, strict=True) if m == 1)
        # the fake engine's `text` drops the end-of-turn token its output_ids carry
        assert tok_builder.decode(resp).replace("<|im_end|>", "") == s.response.replace("<|im_end|>", "")
    assert Sample.Status.COMPLETED in statuses
    assert any(s.metadata["shopsim"]["success"] for s in results)
    assert stack.slot_state()["taken"] == []
    figures = metrics.summarize(step)
    assert figures["rollout/shopsim/episodes"] == 16.0 and figures["rollout/shopsim/infra_errors"] == 0.0


def test_failures_spooled_once_with_their_retry_and_replay_writes_nothing(stack, tmp_path, bank_file):
    # 2 training slots, 10 spare: every failure's retry gets a spare slot before the step ends
    args = stack.args(tmp_path / "round-000", bank_path=bank_file, concurrency=2)
    samples = samples_for(stack, 4, 3, start_index=40)
    results, step = run_step(args, [copy.deepcopy(s) for s in samples], rollout_id=5)
    spool = tmp_path / "round-000" / "spool"
    failed = [s for s in results if not s.metadata["shopsim"]["success"]]
    assert failed, "the fixture's policy fails some episodes"
    want = {f"r0-s5-g{s.group_index}-i{s.index}" for s in failed}
    assert {p.stem for p in spool.glob("*.json")} == want
    for p in spool.glob("*.json"):
        rec = jsonfiles.load_validated(p, "spool")
        assert rec["failed"]["skills_shown"] == ["sk-f1f68f913583"]
        assert rec["retry"] is not None and rec["retry"]["skills_shown"] == ["sk-542b77510f35", "sk-f1f68f913583"]
        # step 5 is played by the weights step 4 trained, which slime saves as iter 4 (not 5)
        assert rec["policy"] == {"iteration": 4, "model": "fake-policy"}
    before = {p.name: p.read_bytes() for p in spool.glob("*.json")}
    assert step.spool_written == len(want) and len(step.retries) == len(want)
    # slime replays the step after a resume: same ids, no second file, no retry spent
    results2, step2 = run_step(args, [copy.deepcopy(s) for s in samples], rollout_id=5)
    assert {p.name: p.read_bytes() for p in spool.glob("*.json")} == before
    failed2 = [s for s in results2 if not s.metadata["shopsim"]["success"]]
    assert step2.spool_written == 0 and step2.spool_existing == len(failed2) and not step2.retries
    assert stack.slot_state()["taken"] == []


def test_rollout_function_through_slimes_loop_returns_metrics(stack, tmp_path, bank_file):
    from slime.rollout.base_types import RolloutFnTrainOutput, call_rollout_fn
    from slime.rollout.data_source import RolloutDataSourceWithBuffer
    from slime.rollout.sample_hooks import set_current_rollout_id
    from slime.utils.misc import load_function

    # The fake engine's outcome is the same for every sample of a group (a function of the task and
    # the skills shown), so groups never vary: the _with_fallback filter keeps them when too few
    # are left instead of sampling forever (check_reward_nonzero_std is applied to the output below).
    fallback = "slime.rollout.filter_hub.dynamic_sampling_filters.check_reward_nonzero_std_with_fallback"
    args = stack.args(tmp_path / "round-000", bank_path=bank_file, rollout_batch_size=2,
                      over_sampling_batch_size=4, n_samples_per_prompt=4, dynamic_sampling_filter_path=fallback)
    source = RolloutDataSourceWithBuffer(args)
    fn = load_function(args.rollout_function_path)
    aborts = stack.router_counts()["aborts"]
    for rollout_id in (0, 1):
        set_current_rollout_id(rollout_id)
        out = call_rollout_fn(fn, args, rollout_id, source, evaluation=False)
        assert isinstance(out, RolloutFnTrainOutput) and len(out.samples) == 2
        for group in out.samples:
            assert len(group) == 4
            for s in group:
                assert_aligned(s)
        names = set(out.metrics)
        for name in ["success_rate", "strict_mean", "loose_mean", "turns_mean", "termination/done",
                     "termination/aborted", "retry_rate", "retry_success", "slot_wait_mean_s", "infra_errors",
                     "episodes", "failures", "retries", "spool_written"]:
            assert f"rollout/shopsim/{name}" in names, name
    # the reward is in the form slime's filter reads (Sample.get_reward_value -> float)
    from slime.rollout.filter_hub.dynamic_sampling_filters import check_reward_nonzero_std

    group = out.samples[0]
    assert check_reward_nonzero_std(args, group).keep is False  # the fake's groups never vary
    rewards = sorted({s.reward for g in out.samples for s in g})
    if len(rewards) > 1:
        mixed = [next(s for g in out.samples for s in g if s.reward == r) for r in rewards]
        assert check_reward_nonzero_std(args, mixed).keep is True
    lines = (tmp_path / "round-000" / "rollout_metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["rollout_id"] for x in lines] == [0, 1]
    assert json.loads(lines[1])["metrics"] == {k: v for k, v in out.metrics.items() if k.startswith("rollout/shopsim/")}
    assert stack.router_counts()["aborts"] >= aborts + 2  # slime's end-of-step abort reached the engines
    assert stack.slot_state()["taken"] == []


def test_responses_the_episode_keeps_and_sends_carry_no_stop_token(stack, tmp_path, bank_file):
    """slime's sampling params keep EOS in SGLang's `text`; the action sent to ShopSimulator and the
    turn recorded in the spool are the reply without it."""
    args = stack.args(tmp_path / "round-000", bank_path=bank_file, concurrency=4)
    run_step(args, samples_for(stack, 2, 2), rollout_id=0)
    recs = [json.loads(f.read_text()) for f in (tmp_path / "round-000" / "spool").glob("*.json")]
    turns = [t for r in recs for ep in (r["failed"], r["retry"]) if ep for t in ep["turns"]]
    assert turns and all("<|im_end|>" not in t["response"] for t in turns)


def test_a_save_killed_before_its_data_state_resumes_at_the_recorded_position(stack, tmp_path, bank_file):
    """slime writes the tracker before the data source's state file; a job killed in between comes
    back with the data source at offset 0 (slime data_source.py:138-148 finds no file and says
    nothing). The plugin records the position after every step and puts it back."""
    from slime.rollout.base_types import call_rollout_fn
    from slime.rollout.data_source import RolloutDataSourceWithBuffer
    from slime.rollout.sample_hooks import set_current_rollout_id
    from slime.utils.misc import load_function
    from support.rollout_stack import fresh_slime_singletons

    megatron = tmp_path / "megatron"
    args = stack.args(tmp_path / "round-000", bank_path=bank_file, rollout_batch_size=2, over_sampling_batch_size=2,
                      n_samples_per_prompt=2, dynamic_sampling_filter_path=None, save=str(megatron),
                      load=str(megatron))
    fn = load_function(args.rollout_function_path)
    source = RolloutDataSourceWithBuffer(args)
    for rollout_id in (0, 1):
        set_current_rollout_id(rollout_id)
        call_rollout_fn(fn, args, rollout_id, source, evaluation=False)
    state = megatron / "rollout" / "global_dataset_state_dict_1.pt"
    assert not state.exists() and source.sample_group_index >= 4  # slime was killed before saving it

    fresh_slime_singletons()  # the resumed job: a new RolloutManager, its data source loads nothing
    resumed = RolloutDataSourceWithBuffer(args)
    resumed.load(1)
    assert resumed.sample_group_index == 0
    set_current_rollout_id(2)
    out = call_rollout_fn(fn, args, 2, resumed, evaluation=False)
    assert min(s.group_index for g in out.samples for s in g) == source.sample_group_index
    assert state.is_file()  # written back in the data source's own format
