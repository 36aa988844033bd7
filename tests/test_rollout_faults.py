"""Slot release on every path, and the acceptance run: 200 concurrent episodes with injected
ShopSimulator errors, policy timeouts, cancellations and slime's end-of-step abort (issue 5)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fakes.shop_fixture import write_shop_fixture
from support.rollout_stack import Stack, assert_aligned, sampling_params, use_slime_stub
from support.skillbank import bank_of
from support.tokenizer import build_tokenizer

from pyhelpers import jsonfiles
from pyhelpers.rollout import metrics, retry, runtime
from pyhelpers.skills.bank import write_bank

use_slime_stub()
from slime.rollout.sglang_rollout import GenerateState  # noqa: E402  (the stand-in)
from slime.utils.types import Sample  # noqa: E402

pytestmark = pytest.mark.heavy  # the rollout plugin against fake SGLang, router and ShopSimulator processes


def _samples(tasks: list[dict], n_groups: int, per_group: int) -> list[Sample]:
    out = []
    for g in range(n_groups):
        t = tasks[g % len(tasks)]
        for _ in range(per_group):
            out.append(Sample(group_index=g, index=len(out), prompt=t["instruction"], label=f"t{t['idx']:04d}"))
    return out


def _bank(tmp_path):
    path = tmp_path / "skillbank.json"
    write_bank(path, bank_of([("搜索结果很多时", "先核对类别再点击"), ("选择规格时", "先选颜色再购买")],
                             ["active", "candidate"]))
    return path


def test_no_free_slot_is_an_infra_error_and_leaks_nothing(tmp_path):
    """The plugin believes in 6 slots, the simulator has 2: four resets find none (NoSlotError)."""
    from pyhelpers.rollout.generate import generate

    fx = write_shop_fixture(tmp_path / "shop", n_tasks=4, n_eval=0, base_success=0.5)
    st = Stack(tmp_path, slots=2, fixture=fx, tokenizer=build_tokenizer(tmp_path / "tok"),
               reset_retries=2, reset_delay=0.05)
    try:
        args = st.args(tmp_path / "round-000", concurrency=6, yaml_extra={"shopsim_slots": 6})

        async def main():
            step = metrics.begin(0)
            out = await asyncio.gather(*(generate(args, s, sampling_params(args)) for s in _samples(fx["tasks"], 3, 2)))
            await retry.drain(runtime.current(), step, 10.0)
            await runtime.close_all()
            return out, step

        out, step = asyncio.run(main())
        infra = [s for s in out if s.metadata["shopsim"]["termination"] == "infra_error"]
        assert infra and all(s.status == Sample.Status.FAILED and s.remove_sample and s.reward == 0.0 for s in infra)
        assert "no free environment slot" in infra[0].metadata["shopsim"]["error"]
        for s in out:
            assert_aligned(s)
        assert metrics.summarize(step)["rollout/shopsim/infra_errors"] == len(infra)
        assert not list((tmp_path / "round-000" / "spool").glob("*.json"))  # infra failures are not spooled
        assert st.slot_state()["taken"] == []
    finally:
        st.close()


def test_200_concurrent_episodes_with_faults_leave_no_slot_and_one_spool_file_per_failure(tmp_path):
    from pyhelpers.rollout.generate import generate

    fx = write_shop_fixture(tmp_path / "shop", n_tasks=16, n_eval=0, base_success=0.4, seed=11)
    st = Stack(tmp_path, slots=24, fixture=fx, tokenizer=build_tokenizer(tmp_path / "tok"),
               error_rate=0.15, slow_share=0.15, slow_s=30.0, seed=11)
    args = st.args(tmp_path / "round-000", bank_path=_bank(tmp_path), concurrency=16,
                   yaml_extra={"generate_timeout_s": 2.0, "retry_drain_timeout_s": 10.0})
    samples = _samples(fx["tasks"], 50, 4)
    state = GenerateState(args)
    state.reset()

    async def main():
        step = metrics.begin(9)
        tasks = [asyncio.ensure_future(generate(args, s, sampling_params(args))) for s in samples]

        async def cancel_some():  # every 9th episode is cancelled at a different moment
            for n, t in enumerate(tasks):
                if n % 9 == 4:
                    await asyncio.sleep(0.01 * (n % 5))
                    t.cancel()

        async def slime_abort():  # slime's end of step: enough groups kept, abort the rest
            while sum(t.done() for t in tasks) < 150:
                await asyncio.sleep(0.05)
            state.aborted = True
            async with httpx.AsyncClient() as http:
                await http.post(st.router_url + "/abort_request", json={"abort_all": True})

        await asyncio.gather(cancel_some(), slime_abort())
        results = await asyncio.gather(*tasks, return_exceptions=True)
        await retry.drain(runtime.current(), step, args.shopsimrl_retry_drain_timeout_s)
        await runtime.close_all()
        return results, step

    try:
        results, step = asyncio.run(main())
        state.reset()
        done = [r for r in results if isinstance(r, Sample)]
        cancelled = [r for r in results if isinstance(r, asyncio.CancelledError)]
        assert len(done) + len(cancelled) == 200, [r for r in results if isinstance(r, BaseException)][:3]
        assert cancelled
        for s in done:
            assert_aligned(s)
        terms = {t: sum(s.metadata["shopsim"]["termination"] == t for s in done) for t in metrics.TERMINATIONS}
        assert terms["infra_error"] and terms["timeout"] and terms["aborted"], terms
        for s in done:
            t = s.metadata["shopsim"]["termination"]
            assert s.remove_sample == (t not in metrics.SCORED)
            assert s.status == {"aborted": Sample.Status.ABORTED, "timeout": Sample.Status.FAILED,
                                "infra_error": Sample.Status.FAILED}.get(t, s.status)
        # zero slots left taken
        assert st.slot_state()["taken"] == []
        # every failure has one spool file, named by its id, schema-valid -- except those whose
        # retry hit an injected infra error (deferred: a replay would write them); nothing else
        failures = [s for s in done if s.metadata["shopsim"]["termination"] in metrics.SCORED
                    and not s.metadata["shopsim"]["success"]]
        assert failures
        files = sorted((tmp_path / "round-000" / "spool").iterdir())
        assert {f.name for f in files} <= {f"r0-s9-g{s.group_index}-i{s.index}.json" for s in failures}
        for f in files:
            rec = jsonfiles.load_validated(f, "spool")
            assert rec["retry"] is None or rec["retry"]["termination"] != "infra_error"
        figures = metrics.summarize(step)
        assert figures["rollout/shopsim/spool_written"] == len(files)
        assert figures["rollout/shopsim/spool_written"] + figures["rollout/shopsim/spool_deferred"] == len(failures)
        assert figures["rollout/shopsim/termination/aborted"] == terms["aborted"] + len(cancelled)
        assert figures["rollout/shopsim/infra_errors"] == terms["infra_error"] + terms["timeout"]
    finally:
        state.reset()
        st.close()


def test_retry_hit_by_slimes_engine_abort_resends_after_the_step_loop(tmp_path):
    """slime aborts every in-flight /generate at the end of a step, the retries' too: a retry turn
    that comes back aborted is sent again once the step's loop is over (Step.closed)."""
    from pyhelpers.rollout.generate import generate

    fx = write_shop_fixture(tmp_path / "shop", n_tasks=4, n_eval=0, base_success=0.0)  # every episode fails
    st = Stack(tmp_path, slots=12, fixture=fx, tokenizer=build_tokenizer(tmp_path / "tok"),
               slow_share=1.0, slow_s=0.3)  # every /generate waits 0.3 s in the router (or until an abort)
    args = st.args(tmp_path / "round-000", bank_path=_bank(tmp_path), concurrency=4)

    async def main():
        step = metrics.begin(2)
        out = await asyncio.gather(*(generate(args, s, sampling_params(args)) for s in _samples(fx["tasks"], 2, 2)))
        async with httpx.AsyncClient() as http:  # slime's abort while the retries are playing
            # Wait (bounded) until a retry turn is really in flight, so the abort cannot miss it
            # on a loaded machine.
            for _ in range(200):
                load = (await http.get(st.router_url + "/v1/loads")).json()
                if load["loads"][0]["num_running_reqs"] > 0:
                    break
                await asyncio.sleep(0.02)
            await http.post(st.router_url + "/abort_request", json={"abort_all": True})
        await retry.drain(runtime.current(), step, 30.0)
        await runtime.close_all()
        return out, step

    try:
        out, step = asyncio.run(main())
        assert st.router_counts()["aborted"] >= 1  # some retry turn was hit
        recs = [jsonfiles.load_validated(f, "spool") for f in (tmp_path / "round-000" / "spool").iterdir()]
        assert len(recs) == 4 and all(r["retry"] is not None for r in recs)
        assert all(r["retry"]["termination"] != "aborted" for r in recs)
        assert st.slot_state()["taken"] == []
    finally:
        st.close()


def test_abandoned_step_writes_no_record_for_unfinished_retries_but_a_completed_step_does(tmp_path):
    """The job is stopped mid-step (Ray's SIGTERM handler raises SystemExit through slime's loop):
    the step replays after a resume, so a retry cut short must not leave a `retry: null` record
    that would win over the replay's complete one. A step that completed and only hit drain's
    deadline keeps its failures, with `retry: null`."""
    from pyhelpers.rollout.generate import generate

    fx = write_shop_fixture(tmp_path / "shop", n_tasks=4, n_eval=0, base_success=0.0)  # every episode fails
    st = Stack(tmp_path, slots=12, fixture=fx, tokenizer=build_tokenizer(tmp_path / "tok"),
               slow_share=1.0, slow_s=0.3)  # retries are still playing when the step ends

    def step_end(round_dir, rollout_id: int, abandoned: bool):
        args = st.args(round_dir, bank_path=_bank(tmp_path), concurrency=4)

        async def main():
            step = metrics.begin(rollout_id)
            await asyncio.gather(*(generate(args, s, sampling_params(args)) for s in _samples(fx["tasks"], 2, 2)))
            step.abandoned = abandoned
            await retry.drain(runtime.current(), step, 0.05)
            await runtime.close_all()
            return metrics.summarize(step)

        figures = asyncio.run(main())
        recs = [jsonfiles.load_validated(f, "spool") for f in (round_dir / "spool").glob("*.json")]
        return figures, recs

    try:
        figures, recs = step_end(tmp_path / "round-000", 0, abandoned=True)
        assert recs == [] and figures["rollout/shopsim/spool_deferred"] == 4
        assert st.slot_state()["taken"] == []
        figures, recs = step_end(tmp_path / "round-001", 1, abandoned=False)
        assert len(recs) == 4 and all(r["retry"] is None for r in recs)
        assert figures["rollout/shopsim/spool_deferred"] == 0 and figures["rollout/shopsim/spool_written"] == 4
        assert st.slot_state()["taken"] == []
    finally:
        st.close()


def test_a_bad_or_shifted_task_index_stops_the_step_naming_the_task_and_its_slot_is_freed(tmp_path):
    """Training checks every reset too (issue 17 §4): a task index the server does not have is a
    task error naming the task (not an infra_error Sample), its popped slot is freed at the end of
    the step; a task whose index plays another goal stops the step naming both instructions."""
    import json

    from pyhelpers.rollout.generate import generate
    from pyhelpers.shopsim.taskcheck import TaskError

    fx = write_shop_fixture(tmp_path / "shop", n_tasks=4, n_eval=0, base_success=0.5)
    st = Stack(tmp_path, slots=3, fixture=fx, tokenizer=build_tokenizer(tmp_path / "tok"),
               reset_retries=2, reset_delay=0.05)
    try:
        args = st.args(tmp_path / "round-000", concurrency=2)
        first, second = fx["tasks"][0], fx["tasks"][1]
        extra = [{"task_id": "tbad", "shopsim_idx": 999, "split": "train", "instruction": first["instruction"]},
                 {"task_id": "tshift", "shopsim_idx": second["idx"], "split": "train",
                  "instruction": first["instruction"]}]
        with open(args.shopsimrl_tasks_path, "a", encoding="utf-8") as fh:
            fh.writelines(json.dumps(t, ensure_ascii=False) + "\n" for t in extra)

        async def main():
            step = metrics.begin(0)
            try:
                with pytest.raises(TaskError, match="tbad: ShopSimulator has no task index 999") as bad:
                    await generate(args, Sample(group_index=0, index=0, label="tbad"), sampling_params(args))
                with pytest.raises(TaskError, match="tshift") as shifted:
                    await generate(args, Sample(group_index=1, index=1, label="tshift"), sampling_params(args))
                assert st.slot_state()["free"] == 1  # the bad index's two resets' slots are still taken ...
            finally:
                await retry.drain(runtime.current(), step, 10.0)
            await runtime.close_all()
            return bad.value, shifted.value, metrics.summarize(step)

        bad, shifted, figures = asyncio.run(main())
        assert "--server-file" in str(bad) and "--server-file" in str(shifted)
        assert first["instruction"] in str(shifted) and second["instruction"] in str(shifted)
        view = st.slot_state()
        assert view["taken"] == [] and view["counts"]["reset_error"] == 2, view  # ... until the step ended
        assert figures["rollout/shopsim/unknown_slots_freed"] == 2.0
    finally:
        st.close()


def test_no_request_of_ours_is_in_flight_when_the_rollout_function_returns(tmp_path):
    """Under --colocate slime releases the engines' memory right after the rollout function returns
    (flush_cache, then release_memory_occupation, which SGLang allows only on an idle engine; the
    stand-in's engine dies otherwise). Full-skill retries play on after slime's end-of-step abort
    and drain's deadline cancels them: their /generate must not be left in flight."""
    from slime.backends.sglang_utils.sglang_engine import SGLangEngine
    from slime.rollout.base_types import call_rollout_fn
    from slime.rollout.data_source import RolloutDataSourceWithBuffer
    from slime.rollout.sample_hooks import set_current_rollout_id
    from slime.utils.misc import load_function

    fx = write_shop_fixture(tmp_path / "shop", n_tasks=4, n_eval=0, base_success=0.0)  # every episode fails
    # Every /generate sent after slime's abort waits 60 s in the engine (or until the next abort);
    # 40 ms per answer keeps the last failed episode's retry playing when slime aborts.
    st = Stack(tmp_path, slots=12, fixture=fx, tokenizer=build_tokenizer(tmp_path / "tok"),
               slow_s=60.0, slow_after_abort=True, engine_latency_ms=40)
    try:
        args = st.args(tmp_path / "round-000", bank_path=_bank(tmp_path), concurrency=4,
                       yaml_extra={"retry_drain_timeout_s": 0.3}, rollout_batch_size=2, over_sampling_batch_size=2,
                       n_samples_per_prompt=2, dynamic_sampling_filter_path=None)
        source = RolloutDataSourceWithBuffer(args)
        set_current_rollout_id(0)
        out = call_rollout_fn(load_function(args.rollout_function_path), args, 0, source, evaluation=False)
        assert out.metrics["rollout/shopsim/failures"] == 4
        assert st.router_counts()["slowed"] >= 1  # a retry did send a turn after slime's abort
        engine = SGLangEngine(st.router_url)
        engine.release_memory_occupation()  # what slime's RolloutManager.offload does next
        engine.resume_memory_occupation()
        assert st.router_counts()["releases"] == 1
        assert st.slot_state()["taken"] == []
    finally:
        GenerateState(args).reset()
        st.close()


def test_a_transient_router_error_is_retried_not_an_infra_error(tmp_path):
    """slime's own post retries any failed request (http_utils.py:165-198); a router briefly
    without an engine (503) must not turn an episode into an infra_error."""
    from pyhelpers.rollout.generate import generate

    fx = write_shop_fixture(tmp_path / "shop", n_tasks=4, n_eval=0, base_success=0.5)
    st = Stack(tmp_path, slots=12, fixture=fx, tokenizer=build_tokenizer(tmp_path / "tok"), router_fail_first=3)
    try:
        args = st.args(tmp_path / "round-000", concurrency=4)

        async def main():
            step = metrics.begin(0)
            out = await asyncio.gather(*(generate(args, s, sampling_params(args)) for s in _samples(fx["tasks"], 2, 2)))
            await retry.drain(runtime.current(), step, 10.0)
            await runtime.close_all()
            return out

        out = asyncio.run(main())
        assert st.router_counts()["failed"] == 3
        assert [s.metadata["shopsim"]["termination"] for s in out if s.remove_sample] == []
    finally:
        st.close()


def test_a_stack_whose_engine_cannot_start_leaves_none_of_its_parts_running(tmp_path):
    """The rollout stack of these tests starts ShopSimulator, the engine, the router in turn: when
    one cannot start, the parts already started end with it (they outlived the test before)."""
    from pyhelpers.procs import procfs

    fx = write_shop_fixture(tmp_path / "shop", n_tasks=4, n_eval=0)
    with pytest.raises(RuntimeError, match="fake_sglang.py did not start"):
        Stack(tmp_path, fixture=fx, tokenizer=tmp_path / "no-tokenizer-here")
    assert procfs.marker_matches(tmp_path) == {}
