"""Full-skill retry of a failed training episode, and its spool record (skillbank.md).

A training episode the policy played to an end without full success (termination done / over /
max_turns / context_budget) is retried once on the same task with the **full** bank view (active
+ probation + candidate skills, same token budget), in a background task of slime's event loop:
the failed Sample goes back to slime at once, and the retry holds only a spare slot
(SHOPSIM_SLOTS - SHOPSIM_EPISODE_CONCURRENCY), so it never delays a training episode. The failure
and its retry become one file, spool/<id>.json with id r{round}-s{rollout_id}-g{group}-i{index},
written first-version-wins (jsonfiles.write_json_exclusive): a step slime replays after a resume
finds the id taken, writes nothing and does not spend a slot on the retry.

End of the step (`drain`, called by our rollout function once slime's loop is done): retries
still waiting for a spare slot give up (retry: null), those playing get `retry_drain_timeout_s`
more, then are cancelled (retry: null). Background rather than awaiting the retry inside the
generate call: awaited, every failed Sample would come back one retry episode later, and slime's
group (and the dynamic-sampling loop) waits for its slowest Sample. The retry is not a training
sample (RETRY_TRAINS=0; settings refuses 1).
slime's end-of-step engine abort can hit a retry's /generate; that turn is sent again once the
step's loop has finished (`Step.closed`).
A retry that ends in an infra error (ShopSimulator or the engines failing -- typically the job
being stopped, which kills engines before this loop) writes no record: it would win over the
complete record that the replayed step writes after a resume. Likewise every retry still queued
or playing when the step is abandoned (slime's loop raised: Ray's SIGTERM handler raises
SystemExit when the job is stopped): cancelled at once, no record. Both are counted
(spool_deferred); in a run that is not resumed, those failures do not reach the analyst.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from pyhelpers.jsonfiles import validation_errors, write_json_exclusive
from pyhelpers.rollout import episode
from pyhelpers.rollout.episode import Episode
from pyhelpers.rollout.metrics import Step
from pyhelpers.rollout.runtime import Runtime
from pyhelpers.shopsim.protocol import ShopSimError

log = logging.getLogger(__name__)


def record_id(round_: int, rollout_id: int, group: int, index: int) -> str:
    return f"r{round_}-s{rollout_id}-g{group}-i{index}"


def played_by(rollout_id: int) -> int:
    """The checkpoint iteration whose weights played step `rollout_id`: slime trains step k after
    playing it and saves the result as iteration k (slime 624b824 train.py:53-80, save_model(rollout_id)
    -> megatron_utils/model.py save(iteration)), then pushes those weights to the engines for step
    k+1. So step k is played by iteration k-1; -1 = the weights of the base model (no step yet)."""
    return rollout_id - 1


def spool_path(rt: Runtime, rid: str) -> Path:
    return rt.settings.spool_dir / f"{rid}.json"


def spool_record(rt: Runtime, rid: str, rollout_id: int, group: int, index: int, task: dict,
                 failed: Episode, retried: Episode | None) -> dict:
    s = rt.settings
    policy: dict[str, Any] = {"iteration": played_by(rollout_id)}
    if s.policy_model:
        policy["model"] = s.policy_model
    return {"schema_version": 1, "id": rid, "round": s.round, "rollout_id": rollout_id, "group": group,
            "index": index, "task_id": str(task["task_id"]), "shopsim_idx": int(task["shopsim_idx"]),
            "instruction": str(task.get("instruction", "")), "failed": failed.doc(),
            "retry": retried.doc() if retried is not None else None, "policy": policy}


def write_spool(rt: Runtime, step: Step, rec: dict) -> None:
    """Validate, then write once. A record that breaks the schema is a bug: counted and logged,
    never allowed to stop training."""
    errors = validation_errors(rec, "spool")
    if errors:
        step.spool_errors += 1
        log.error("spool record %s is invalid, not written: %s", rec.get("id"), errors[0])
        return
    if write_json_exclusive(spool_path(rt, rec["id"]), rec):
        step.spool_written += 1
    else:
        step.spool_existing += 1


def schedule(rt: Runtime, step: Step, sample: Any, task: dict, failed: Episode, sampling_params: dict) -> None:
    """Called by generate for a failed training episode. Returns at once."""
    step.failures += 1
    if sample.group_index is None or sample.index is None:
        step.spool_errors += 1
        log.error("sample without group_index/index: no spool record for task %s", task.get("task_id"))
        return
    rid = record_id(rt.settings.round, step.rollout_id, group=int(sample.group_index), index=int(sample.index))
    if spool_path(rt, rid).exists():  # a replayed step: the first version wins, no retry spent
        step.spool_existing += 1
        return
    group, index = int(sample.group_index), int(sample.index)
    if rt.retries is None:  # no spare slots at all
        step.retry_skipped += 1
        write_spool(rt, step, spool_record(rt, rid, rollout_id=step.rollout_id, group=group, index=index, task=task, failed=failed, retried=None))
        return
    job = asyncio.get_running_loop().create_task(
        _retry(rt, step, rid=rid, group=group, index=index, task=task, failed=failed, sampling_params=dict(sampling_params)), name=f"retry-{rid}")
    step.tasks.add(job)
    job.add_done_callback(step.tasks.discard)


async def _retry(rt: Runtime, step: Step, rid: str, group: int, index: int, task: dict, failed: Episode,
                 sampling_params: dict) -> None:
    retried: Episode | None = None
    try:
        ep = await episode.play(rt, task, skills=rt.full, sampling_params=sampling_params, slots=rt.retries,
                                skip=lambda: step.closing, aborted=lambda: False, after_abort=step.wait_closed)
        if ep.termination == "infra_error" or (step.abandoned and ep.termination == "aborted"):
            _defer(step, rid, ep.termination)
            return
        if ep.termination == "aborted" and not ep.turns:
            step.retry_skipped += 1  # never got a spare slot before the step ended
        else:
            retried = ep
            step.retries.append(ep.stats())
    except asyncio.CancelledError:
        if step.abandoned:
            _defer(step, rid, "cancelled")
        else:  # drain's deadline: the step itself completed
            step.retry_skipped += 1
            write_spool(rt, step, spool_record(rt, rid, rollout_id=step.rollout_id, group=group, index=index, task=task, failed=failed, retried=None))
        raise
    write_spool(rt, step, spool_record(rt, rid, rollout_id=step.rollout_id, group=group, index=index, task=task, failed=failed, retried=retried))


def _defer(step: Step, rid: str, why: str) -> None:
    step.spool_deferred += 1
    log.warning("full-skill retry of %s ended %s; no spool record (a replay writes it)", rid,
                "in an infra error" if why == "infra_error" else f"{why} with its step abandoned")


async def drain(rt: Runtime | None, step: Step, timeout: float) -> None:
    """End of step: queued retries give up, playing ones get `timeout` seconds (none when the
    step is abandoned), then are cancelled; then the client's background slot releases are
    awaited (bounded), and slots failed resets may have taken (a bad task index: pack_api pops a
    slot before the reset fails) are freed with release_all when no episode is in flight -- the
    rollout is the simulator's only user while training runs."""
    step.closing = True
    step.closed.set()
    pending = set(step.tasks)
    if pending:
        _, late = await asyncio.wait(pending, timeout=0 if step.abandoned else timeout)
        for job in late:
            job.cancel()
        if late:
            log.warning("%d full-skill retries still playing after %g s were cancelled", len(late), timeout)
            await asyncio.gather(*late, return_exceptions=True)
    if rt is not None:
        await rt.shopsim.drain(timeout=30.0)
        try:
            step.unknown_slots_freed += await rt.shopsim.free_unknown()
        except ShopSimError as exc:  # the simulator is down: the train stage frees them at its start
            log.warning("slots taken by failed resets not freed: %s", exc)
