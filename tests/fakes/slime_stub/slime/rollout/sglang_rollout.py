"""slime.rollout.sglang_rollout in miniature: the default rollout loop the plugin runs inside.

Same call sequence as slime v0.3.1: generate_rollout (sync) -> run(generate_rollout_async) on the
background loop; groups of n_samples_per_prompt are submitted over_sampling_batch_size at a time
while fewer than rollout_batch_size are pending; each sample goes through generate_and_rm under
GenerateState.semaphore (a sample that gets the semaphore after the abort returns ABORTED; else the
custom generate function from args.custom_generate_function_path, given `evaluation` only if it
takes it; the RM is skipped when the generate set a reward); finished groups pass the dynamic
filter; when enough are kept, abort() sets GenerateState.aborted, aborts every engine the router
lists until its /v1/loads shows no request (slime sglang_rollout.py:339-371, server_control.py)
and waits for every pending group. No RM hub, no
partial rollout, no multimodal, no tracing.
"""

import asyncio
import inspect
import uuid

import httpx

from slime.backends.sglang_utils.server_control import abort_servers_until_idle
from slime.rollout.base_types import RolloutFnTrainOutput
from slime.rollout.filter_hub.base_types import (
    MetricGatherer,
    call_dynamic_filter,
    should_drop_dynamic_filter_output,
)
from slime.utils.async_utils import run
from slime.utils.misc import SingletonMeta, load_function
from slime.utils.types import Sample


class GenerateState(metaclass=SingletonMeta):
    def __init__(self, args):
        self.args = args
        self.semaphore = asyncio.Semaphore(getattr(args, "sglang_server_concurrency", 512))
        self.sampling_params = dict(
            temperature=getattr(args, "rollout_temperature", 1.0), top_p=getattr(args, "rollout_top_p", 1.0),
            top_k=getattr(args, "rollout_top_k", -1), max_new_tokens=args.rollout_max_response_len,
            stop=getattr(args, "rollout_stop", None), stop_token_ids=getattr(args, "rollout_stop_token_ids", None),
            skip_special_tokens=getattr(args, "rollout_skip_special_tokens", False),
            no_stop_trim=True, spaces_between_special_tokens=False)
        if getattr(args, "sglang_enable_deterministic_inference", False):  # one seed per group member
            self.group_sampling_seeds = [args.rollout_seed + i for i in range(args.n_samples_per_prompt)]
        self.reset()

    def reset(self):
        self.remaining_batch_size = 0
        self.pendings = set()
        self.submitted = []  # the group tasks in submission order (the reproducible mode below)
        self.aborted = False

    def submit_generate_tasks(self, samples):
        for group in samples:
            task = asyncio.create_task(
                generate_and_rm_group(self.args, group, sampling_params=self.sampling_params.copy()))
            self.pendings.add(task)
            self.submitted.append(task)
        self.remaining_batch_size += len(samples)


async def generate_and_rm(args, sample, sampling_params, evaluation=False):
    if sample.status in (Sample.Status.COMPLETED, Sample.Status.TRUNCATED):
        return sample
    state = GenerateState(args)
    async with state.semaphore:
        if state.aborted:
            sample.status = Sample.Status.ABORTED
            return sample
        path = getattr(sample, "generate_function_path", None) or args.custom_generate_function_path
        fn = load_function(path)
        if "evaluation" in inspect.signature(fn).parameters:
            sample = await fn(args, sample, sampling_params, evaluation=evaluation)
        else:
            sample = await fn(args, sample, sampling_params)
    samples = sample if isinstance(sample, list) else [sample]
    if any(s.status == Sample.Status.ABORTED for s in samples):
        return sample
    for s in samples:
        if s.reward is None:
            raise RuntimeError("slime stub: no RM hub; the generate function must set sample.reward")
    return sample


async def generate_and_rm_group(args, group, sampling_params, evaluation=False):
    state = GenerateState(args)
    if state.aborted:
        return group
    for sample in group:
        if sample.session_id is None:
            sample.session_id = str(uuid.uuid4())
    tasks = []
    for i, s in enumerate(group):
        params = sampling_params.copy()
        if getattr(args, "sglang_enable_deterministic_inference", False):
            params["sampling_seed"] = state.group_sampling_seeds[i]
        tasks.append(asyncio.create_task(generate_and_rm(args, s, params, evaluation=evaluation)))
    return list(await asyncio.gather(*tasks))


async def _worker_urls(args) -> list[str]:
    base = f"http://{args.sglang_router_ip}:{args.sglang_router_port}"
    async with httpx.AsyncClient(timeout=10.0, trust_env=False) as http:
        resp = await http.get(f"{base}/workers")  # slime: http_utils.get, raises on failure
        resp.raise_for_status()
        return [w["url"] for w in resp.json()["workers"]]


async def abort(args, rollout_id):
    state = GenerateState(args)
    assert not state.aborted
    state.aborted = True
    await abort_servers_until_idle(await _worker_urls(args))
    while state.pendings:
        _, state.pendings = await asyncio.wait(state.pendings, return_when=asyncio.FIRST_COMPLETED)
    return []


async def generate_rollout_async(args, rollout_id, data_source):
    state = GenerateState(args)
    path = getattr(args, "dynamic_sampling_filter_path", None)
    dynamic_filter = load_function(path) if path else None
    gatherer = MetricGatherer()
    target = args.rollout_batch_size
    over = getattr(args, "over_sampling_batch_size", None) or target
    data = []
    # Reproducible mode (args.fake_ordered, FAKE_SLIME_ORDERED=1: rehearsals, whose banks are compared
    # byte for byte across kills and resumes): groups are judged in submission order and every group
    # submitted finishes before the abort. Real slime judges them in completion order and aborts the
    # rest in flight (slime/rollout/sglang_rollout.py:414 and abort :339-371), so which failures reach the spool
    # depends on timing; tests/fakes/README.md lists this divergence.
    ordered = getattr(args, "fake_ordered", False)
    while len(data) < target:
        while state.remaining_batch_size < target:
            state.submit_generate_tasks(data_source(over))
        if ordered:
            first = state.submitted.pop(0)
            await first
            done = {first}
            state.pendings.discard(first)
        else:
            done, state.pendings = await asyncio.wait(state.pendings, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            group = task.result()
            assert len(group) == args.n_samples_per_prompt
            out = call_dynamic_filter(dynamic_filter, args, group)
            if should_drop_dynamic_filter_output(out, remaining_batch_size=state.remaining_batch_size,
                                                 target_data_size=target):
                gatherer.on_dynamic_filter_drop(reason=out.reason)
                state.remaining_batch_size -= 1
                continue
            if len(data) < target:
                data.append(group)
    if ordered and state.pendings:
        await asyncio.wait(state.pendings)
        state.pendings = set()
    aborted = await abort(args, rollout_id)
    data.sort(key=lambda g: g[0].index)
    state.reset()
    return RolloutFnTrainOutput(samples=data, metrics=gatherer.collect()), aborted


def generate_rollout(args, rollout_id, data_source, evaluation=False):
    if evaluation:
        raise NotImplementedError("slime stub: no eval rollout (the toolkit evaluates outside slime)")
    output, aborted = run(generate_rollout_async(args, rollout_id, data_source.get_samples))
    if aborted:
        data_source.add_samples(aborted)
    return output
