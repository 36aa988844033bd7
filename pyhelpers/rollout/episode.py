"""One multi-turn ShopSimulator episode on slime's SGLang router: prompt, turns, outcome.

The prompt is the shared builder's (pyhelpers.policy.prompt_builder: chat template rendered once, then each
turn's response tokens, loss mask 1 with their log-probs, and observation tokens, mask 0) and the
turns are the shared loop's (pyhelpers.policy.turns), so an evaluation episode and a training
episode see the same tokens. Per turn: /generate with max_new_tokens = ROLLOUT_MAX_RESPONSE_LEN
capped by what is left of ROLLOUT_MAX_CONTEXT_LEN (and slime's sampling params otherwise), then
`interact` with the response text. What training adds to a turn is its generate: a retry's
generation hit by slime's end-of-step abort is sent again (after_abort), and log-probs are required.

Ends (termination): done (a purchase), over (the simulator ended it: more than 42 messages),
max_turns, context_budget (no room for another turn or observation) -- these are the policy's
episodes, scored by reward_detail; aborted (slime aborted the rest of the step, or the request),
timeout (a /generate or the whole episode ran past its limit), infra_error (ShopSimulator or
SGLang failed) -- these are not the policy's doing and are never scored or spooled.
The slot is released on every path by ShopSimClient.episode_slot (exceptions, timeouts,
cancellation included).
Every reset is checked against the task file (shopsim.taskcheck): the server's instruction must
be the task's, and a task index the server does not have is no infra_error either. Both raise a
TaskError, which stops the step (and the job) naming the task: every index may be shifted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httpx

from pyhelpers.policy.prompt_builder import ContextBudgetError, Transcript
from pyhelpers.policy.sglang_client import GenerateResult, SGLangError, SGLangRejected
from pyhelpers.policy.turns import TurnLimits, play_turns
from pyhelpers.rollout.metrics import SCORED, EpisodeStats
from pyhelpers.rollout.runtime import Runtime
from pyhelpers.shopsim.protocol import (
    ZERO_SCORES,
    BadTaskIndex,
    Scores,
    ShopSimError,
)
from pyhelpers.shopsim.taskcheck import bad_index, check_reset
from pyhelpers.skills.render import Rendered

log = logging.getLogger(__name__)


@dataclass
class Episode:
    """A played episode: its transcript (token arrays), what happened, and the scores."""

    termination: str
    transcript: Transcript | None
    skills_shown: tuple[str, ...]
    turns: list[dict] = field(default_factory=list)    # {"response", "action"?, "observation"?}
    scores: Scores = ZERO_SCORES
    reward: float = 0.0
    reward_detail: dict | None = None
    slot_wait_s: float = 0.0
    error: str = ""

    @property
    def scored(self) -> bool:
        return self.termination in SCORED

    @property
    def success(self) -> bool:
        return self.scored and self.scores.success

    def stats(self) -> EpisodeStats:
        return EpisodeStats(termination=self.termination, turns=len(self.turns), success=self.success,
                            strict=self.scores.strict, loose=self.scores.loose, reward=self.reward,
                            slot_wait_s=self.slot_wait_s)

    def doc(self) -> dict:
        """The episode as schemas/episode.schema.json stores it in a spool record."""
        return {"skills_shown": list(self.skills_shown), "turns": self.turns, "reward": self.reward,
                "strict": self.scores.strict, "loose": self.scores.loose, "success": self.success,
                "reward_detail": self.reward_detail, "termination": self.termination}


Aborted = Callable[[], bool]
AfterAbort = Callable[[], Awaitable[bool]]


async def play(rt: Runtime, task: dict, skills: Rendered, sampling_params: dict, *, slots: asyncio.Semaphore,
               skip: Aborted, aborted: Aborted, after_abort: AfterAbort | None = None) -> Episode:
    """Play `task` showing `skills`, holding one of `slots` for the slot's lifetime.

    skip(): checked before and after waiting for `slots` (True: give up, termination aborted, no
    turn played). aborted(): checked before each turn (slime's step abort for training episodes).
    after_abort: for retries, which slime's end-of-step engine abort may hit by accident: awaited
    when a /generate comes back aborted; if it returns True the turn is sent again, once.
    A CancelledError propagates (the slot is released on the way out)."""
    s = rt.settings
    ep = Episode("infra_error", None, skills.skill_ids)
    t0 = time.monotonic()
    if skip():
        ep.termination = "aborted"
        return ep
    try:
        ep.transcript = rt.builder.start(task, skills_block=skills.text, max_context_len=s.rollout_max_context_len)
    except ContextBudgetError as exc:  # the skills block + instruction alone fill the budget
        ep.error = str(exc)
        return ep
    async with slots:
        ep.slot_wait_s = time.monotonic() - t0
        if skip():
            ep.termination = "aborted"
            return ep
        try:
            await asyncio.wait_for(_turns(rt, task, ep=ep, sampling_params=sampling_params, aborted=aborted, after_abort=after_abort),
                                   timeout=s.episode_timeout_s)
        except asyncio.TimeoutError:
            ep.termination, ep.error = "timeout", f"episode ran past {s.episode_timeout_s:g} s"
        except BadTaskIndex:  # its popped slot counts in rt.shopsim.unknown_slots (freed at step end)
            raise bad_index(task, s.tasks_path) from None
        except (ShopSimError, SGLangError) as exc:
            ep.termination, ep.error = _infra(exc), f"{type(exc).__name__}: {exc}"
    if ep.termination not in SCORED:
        log.info("episode of task %s ended %s: %s", task.get("task_id"), ep.termination, ep.error)
    return ep


def _infra(exc: Exception) -> str:
    """timeout when the request ran past its limit (the clients chain httpx's timeout), else
    infra_error."""
    return "timeout" if isinstance(exc.__cause__, httpx.TimeoutException) else "infra_error"


async def _turns(rt: Runtime, task: dict, ep: Episode, sampling_params: dict, aborted: Aborted,
                 after_abort: AfterAbort | None) -> None:
    s, b, tr = rt.settings, rt.builder, ep.transcript
    slot_start = time.monotonic()
    async with rt.shopsim.episode_slot(int(task["shopsim_idx"])) as slot:
        ep.slot_wait_s += time.monotonic() - slot_start  # the reset (pack_api waits for a free env)
        check_reset(task, slot.reset, s.tasks_path)

        async def generate(token_ids: list[int], params: dict) -> GenerateResult:
            try:
                out = await rt.policy.generate(token_ids, params)
                if out.aborted and after_abort is not None and await after_abort():
                    out = await rt.policy.generate(token_ids, params)
            except SGLangRejected as exc:  # the turn loop ends the episode as context_budget
                log.warning("SGLang refused a turn of task %s: %s", task.get("task_id"), exc)
                raise
            if out.logprobs is None:  # training needs every response token's log-prob
                raise SGLangError("/generate answered without output_token_logprobs")
            return out

        limits = TurnLimits(s.max_turns, s.rollout_max_context_len, s.rollout_max_response_len)
        end = await play_turns(b, tr, task, limits=limits, sampling=sampling_params, generate=generate,
                               interact=slot.interact, turns=ep.turns, stop=aborted)
        ep.termination = end.termination
        if end.step is not None:
            ep.scores = end.step.scores
            ep.reward = end.step.scores.value(s.reward)
            ep.reward_detail = end.step.reward_detail or None
