"""One evaluation episode: the shared turn loop on the shared prompt builder, and its infra retries.

The prompt is pyhelpers.policy.prompt_builder's (the chat template rendered once, then each turn's response
tokens and observation tokens appended exactly as training does), the turns are
pyhelpers.policy.turns' (training's loop; evaluation passes in a timed generate and an interact
that first checks the slot is still its own, see below), generation is SGLang's native
/generate with max_new_tokens = ROLLOUT_MAX_RESPONSE_LEN capped by what is left of
ROLLOUT_MAX_CONTEXT_LEN, and the simulator is driven through ShopSimClient.episode_slot (the slot
is released on every path). Terminations are the rollout plugin's (pyhelpers.rollout.metrics):

  done, over, max_turns, context_budget   the policy's episodes: scored
  infra_error                             ShopSimulator or SGLang failed EVAL_EPISODE_RETRIES + 1
                                          times (or an attempt ran past its time limit): not scored,
                                          excluded from every rate, reported

An infra error (TransportError, NoSlotError after the server's own retries, a `result.error`
answer, SGLang unreachable / 5xx / aborted, a timeout) restarts the episode from scratch after a
back-off and after the failing service answers its readiness probe again (a restarted simulator
takes minutes to build its envs); the failed attempt is never counted as a policy failure. A 4xx
from SGLang (prompt + max_new_tokens beyond the server's context) ends the episode as
context_budget, as in training.

Slots across a simulator restart: pack_api has no lease token, and a restarted simulator hands
out the same slot numbers again, so a slot taken before the restart may belong to another
episode after it. Releasing it, or sending it another interact, would put two episodes on one
env. Hence an *epoch*: when a request finds the simulator gone (connection refused or dropped,
not a timeout), Context.simulator_down() starts a new epoch; an episode whose slot is from an
older epoch stops before its next interact and leaves the slot alone (abandon: no release; the
ledger keeps it and the runner's end-of-run clean-up releases it when nothing is in flight).
An interact answer for another task (`idx`) means the same and is treated the same way.

The epoch only helps when some request saw the simulator gone: a client starved through the whole
restart sees nothing. What makes the outcome independent of timing is the launcher's fence
(shopsim/client.py): the restarted simulator refuses an old slot's interact unseen
(StaleSlotError), which starts a new epoch here too.

Tasks: after every reset the server's instruction is compared with the task file's
(shopsim.taskcheck); a mismatch, or a task index the server does not have, is a TaskError that
stops the evaluation (never an infra retry). A reset that failed in any other way than "no free
slot" may have taken a slot (pack_api pops first): the ledger records an unknown slot, which the
runner's clean-up frees.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

import httpx

from pyhelpers.evaluate.settings import EvalSettings
from pyhelpers.policy.prompt_builder import ContextBudgetError, PromptBuilder
from pyhelpers.policy.sglang_client import GenerateResult, SGLangClient, SGLangError, SGLangUnavailable
from pyhelpers.policy.system_prompt import PROMPT_VERSION
from pyhelpers.policy.turns import TurnLimits, play_turns
from pyhelpers.shopsim.answers import unusable_server
from pyhelpers.shopsim.client import EpisodeSlot, ShopSimClient
from pyhelpers.shopsim.protocol import (
    BadTaskIndex,
    NoSlotError,
    ShopSimError,
    StaleSlotError,
    StepResult,
    TransportError,
    UnusableServer,
)
from pyhelpers.shopsim.taskcheck import bad_index, check_reset
from pyhelpers.skills.render import Rendered

log = logging.getLogger(__name__)

# SGLang's request id of an evaluation's /generate: this prefix, the episode's id, a nonce per try
# (SGLangClient.generate), so a request in SGLang's log (--log-requests) names its episode. The
# stand-in engine (tests/fakes/fake_sglang.py) draws such a request per task wherever it is
# played, the eval server or the job's engines (the one-job mode: docs/one-job-mode.md).
EVAL_RID_PREFIX = "shopsimrl-eval/"

SCORED = ("done", "over", "max_turns", "context_budget")
TERMINATIONS = SCORED + ("infra_error",)
NO_SKILLS = Rendered("")


@dataclass(frozen=True)
class EpisodeSpec:
    """What to play: a stable id (the resume key), the task record, the arm and the skills."""

    id: str
    task: dict
    arm: str = "bare"
    pair: int | None = None
    mask: tuple[str, ...] = ()      # the gate's mask (skills under test switched on)
    skills: Rendered = NO_SKILLS    # the block actually shown (mask + background, within budget)


class SlotLost(ShopSimError):
    """An interact answer belongs to another task: the slot is no longer this episode's (the
    simulator restarted, or someone released and re-took it)."""


def _gone(exc: Exception) -> bool:
    """The simulator was not there (refused or dropped connection), as opposed to slow (timeout)
    or answering with an error. ShopSimClient chains httpx's exception as the cause."""
    cause = exc.__cause__
    return isinstance(exc, TransportError) and isinstance(cause, httpx.TransportError) \
        and not isinstance(cause, httpx.TimeoutException)


def _abandon(ctx: Context, slot: EpisodeSlot) -> bool:
    """Never release this slot from here (EpisodeSlot.over means exactly that); the ledger keeps
    it as not freed, for the runner's clean-up. Found necessary by tests/test_eval.py's restart
    test: without it two episodes ended up on one env."""
    slot.over = True
    ctx.shopsim.held.discard(slot.env_idx)
    return True


class InfraError(Exception):
    """An attempt failed for a reason that is not the policy's (see module doc)."""

    def __init__(self, service: str, message: str):
        self.service = service  # "shopsim" | "server"
        super().__init__(f"{service}: {message}")


class Hooks:
    """Called around a slot's lifetime (the runner's slot ledger implements them)."""

    def reset_sent(self, key: str) -> None:
        """A reset (which pops a slot server-side) is about to be sent for attempt `key`."""

    def slot_held(self, key: str, env_idx: int) -> None:
        """The reset answered: attempt `key` holds slot env_idx."""

    def slot_done(self, key: str, env_idx: int | None, freed: bool) -> None:
        """The attempt is over; freed=False when the slot may still be taken (release failed, or
        the reset's answer was lost so env_idx is unknown)."""


@dataclass
class Attempt:
    termination: str = "infra_error"
    turns: int = 0
    reward: float = 0.0
    strict: float = 0.0
    success: bool = False
    reward_detail: dict | None = None
    purchase: dict | None = None
    generate_s: float = 0.0
    interact_s: float = 0.0
    slot_wait_s: float = 0.0
    actions: list[str] = field(default_factory=list)


class Context:
    """What every episode of one evaluation shares: the two clients, the prompt builder."""

    def __init__(self, settings: EvalSettings, builder: PromptBuilder, *, hooks: Hooks | None = None):
        s = self.settings = settings
        self.builder, self.hooks = builder, hooks or Hooks()
        self.shopsim = ShopSimClient(s.shopsim_url, timeout=s.request_timeout_s, reset_timeout=s.reset_timeout_s,
                                     max_slots=s.slots, pool_size=s.slots, max_connections=max(64, 2 * s.in_flight),
                                     token=s.shopsim_token)
        self.server = SGLangClient(s.server_url, timeout=s.generate_timeout_s, max_connections=max(64, 2 * s.in_flight))
        self._ready = {"shopsim": asyncio.Lock(), "server": asyncio.Lock()}
        self.epoch = 0  # bumped when the simulator was found gone (see module doc)

    def simulator_down(self) -> None:
        self.epoch += 1

    async def shopsim_up(self, timeout: float = 5.0) -> bool:
        """The simulator's no-slot probe; a ToolkitError when the server there will not serve
        (another program, or ShopSimulator answering with an error)."""
        try:
            return await self.shopsim.probe(timeout=timeout)
        except UnusableServer as exc:
            raise unusable_server(exc, self.settings.shopsim_url) from None

    async def aclose(self) -> None:
        await self.shopsim.aclose()
        await self.server.aclose()

    async def wait_ready(self, service: str) -> bool:
        """Poll the service's readiness probe (one poller at a time) until it answers or its wait
        (SHOPSIM_START_TIMEOUT / the server's) runs out. The simulator's probe consumes no slot."""
        s = self.settings
        limit = s.shopsim_ready_s if service == "shopsim" else s.server_ready_s
        probe = self.shopsim_up if service == "shopsim" else self.server.health
        async with self._ready[service]:
            deadline = time.monotonic() + limit
            while True:
                try:
                    if await probe():
                        return True
                except ShopSimError:
                    pass
                if time.monotonic() >= deadline:
                    return False
                await asyncio.sleep(0.5)


async def play(ctx: Context, spec: EpisodeSpec) -> dict:
    """Play `spec` (retrying infra errors) and return its episodes.jsonl record."""
    s = ctx.settings
    t0 = time.monotonic()
    errors: list[str] = []
    retry_wait, service = 0.0, "shopsim"
    att = Attempt()
    for attempt in range(s.episode_retries + 1):
        if attempt:
            w0 = time.monotonic()
            await asyncio.sleep(min(s.retry_delay_max_s, s.retry_delay_s * 2 ** (attempt - 1)))
            await ctx.wait_ready(service)
            retry_wait += time.monotonic() - w0
        key = f"{spec.id}#{attempt}"
        try:
            att = await asyncio.wait_for(_attempt(ctx, spec, key), timeout=s.episode_timeout_s)
            break
        except InfraError as exc:
            service = exc.service
            errors.append(str(exc))
        except asyncio.TimeoutError:
            service = "server"
            errors.append(f"attempt ran past {s.episode_timeout_s:g} s")
        log.info("episode %s: infra error on attempt %d: %s", spec.id, attempt + 1, errors[-1])
        att = Attempt()
    return {
        "id": spec.id, "task_id": spec.task["task_id"], "shopsim_idx": int(spec.task["shopsim_idx"]),
        "arm": spec.arm, "pair": spec.pair, "mask": list(spec.mask), "shown": list(spec.skills.skill_ids),
        "dropped": list(spec.skills.dropped), "termination": att.termination, "turns": att.turns,
        "reward": att.reward, "strict": att.strict, "success": att.success, "reward_detail": att.reward_detail,
        "purchase": att.purchase, "actions": att.actions, "attempts": len(errors) + (att.termination != "infra_error"),
        "infra_errors": errors, "prompt_version": PROMPT_VERSION,
        "timing": {"episode_s": round(time.monotonic() - t0, 4), "generate_s": round(att.generate_s, 4),
                   "interact_s": round(att.interact_s, 4), "slot_wait_s": round(att.slot_wait_s, 4),
                   "retry_wait_s": round(retry_wait, 4)},
    }


async def _attempt(ctx: Context, spec: EpisodeSpec, key: str) -> Attempt:
    s, b = ctx.settings, ctx.builder
    att = Attempt()
    try:
        tr = b.start(spec.task, skills_block=spec.skills.text, max_context_len=s.max_context_len)
    except ContextBudgetError:  # instruction + skills block alone fill the budget
        att.termination = "context_budget"
        return att
    t0 = time.monotonic()
    ctx.hooks.reset_sent(key)
    slot = ctx.shopsim.episode_slot(int(spec.task["shopsim_idx"]))
    entered, reset_error, abandoned = False, None, False
    epoch = ctx.epoch  # taken before the reset: a slot answered across a restart counts as old
    try:
        async with slot:
            entered = True
            att.slot_wait_s = time.monotonic() - t0
            ctx.hooks.slot_held(key, slot.env_idx)
            check_reset(spec.task, slot.reset, ctx.settings.shopsim_url)
            try:
                await _turns(ctx, spec, tr=tr, slot=slot, att=att, epoch=epoch)
            except ShopSimError as exc:
                if _gone(exc) or isinstance(exc, StaleSlotError):
                    ctx.simulator_down()
                if _gone(exc) or isinstance(exc, (SlotLost, StaleSlotError)):
                    abandoned = _abandon(ctx, slot)
                raise
            finally:
                if ctx.epoch != epoch and not abandoned:  # the simulator went away meanwhile
                    abandoned = _abandon(ctx, slot)
    except ShopSimError as exc:
        if not entered:
            reset_error = exc
            if isinstance(exc, BadTaskIndex):
                raise bad_index(spec.task, ctx.settings.shopsim_url) from None
            if _gone(exc):
                ctx.simulator_down()
        raise InfraError("shopsim", f"{type(exc).__name__}: {exc}") from exc
    except SGLangError as exc:
        raise InfraError("server", f"{type(exc).__name__}: {exc}") from exc
    finally:
        if entered:
            ctx.hooks.slot_done(key, slot.env_idx, freed=(slot.over or slot.released) and not abandoned)
        else:  # only "no free slot" certainly took none: pack_api pops before the reset can fail
            ctx.hooks.slot_done(key, None, freed=isinstance(reset_error, NoSlotError))
    return att


async def _turns(ctx: Context, spec: EpisodeSpec, tr, slot: EpisodeSlot, att: Attempt, epoch: int) -> None:
    s, task = ctx.settings, spec.task

    async def generate(token_ids: list[int], params: dict) -> GenerateResult:
        t0 = time.monotonic()
        out = await ctx.server.generate(token_ids, params, rid=EVAL_RID_PREFIX + spec.id)
        att.generate_s += time.monotonic() - t0
        if out.aborted:  # nothing of ours aborts an eval generation: the server failed
            raise SGLangUnavailable("/generate answered finish_reason abort")
        return out

    async def interact(reply: str) -> StepResult:
        if ctx.epoch != epoch:
            raise SlotLost(f"the simulator went away since slot {slot.env_idx} was taken", action="interact")
        t0 = time.monotonic()
        step = await slot.interact(reply)
        att.interact_s += time.monotonic() - t0
        owner = step.raw.get("idx")
        if isinstance(owner, int) and owner != int(task["shopsim_idx"]):
            raise SlotLost(f"slot {slot.env_idx} now plays task {owner}, not {task['shopsim_idx']}", action="interact")
        return step

    played: list[dict] = []
    limits = TurnLimits(s.max_turns, s.max_context_len, s.max_response_len)
    end = await play_turns(ctx.builder, tr, task, limits=limits, sampling=s.sampling, generate=generate,
                           interact=interact, turns=played)
    att.termination, att.turns = end.termination, len(played)
    att.actions = [turn.get("action", "") for turn in played]
    if end.step is not None:
        step = end.step
        att.reward, att.strict, att.success = step.scores.loose, step.scores.strict, step.scores.success
        att.reward_detail = step.reward_detail or None
        att.purchase = step.purchase or None
