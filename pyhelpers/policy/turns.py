"""The multi-turn episode loop, one for training rollouts (pyhelpers.rollout.episode) and
evaluation (pyhelpers.evaluate.episode): the same turns give the same tokens on both paths.

A turn: the next generation's budget (ROLLOUT_MAX_RESPONSE_LEN capped by what is left of
ROLLOUT_MAX_CONTEXT_LEN), /generate on the transcript's tokens, the response into the transcript
(loss mask 1, its log-probs), `interact` with the response text, then the observation (a persona
task's with its user document) into the transcript (mask 0).

What the two paths do differently is passed in, never chosen here:
  generate(token_ids, params)   the policy server; evaluation times it and treats an aborted
                                generation as an infra error, training resends one that slime's
                                end-of-step abort hit and insists on log-probs
  interact(reply)               the simulator slot; evaluation checks first that the slot is still
                                its own (the epoch, the task index of the answer) and times it
  stop()                        checked before each turn (training: slime aborted the step)
  turns                         the list each turn is appended to as it is played, so a caller
                                cut short by a timeout keeps what was played

Ends: done, over (the simulator's; Ending.step holds its scores), max_turns, context_budget (no
room for another generation or observation, or the server refused the request as too long),
aborted (stop(), or a generation the server aborted: its tokens are kept). Exceptions of
generate/interact propagate: what they mean (infra error, timeout, a lost slot) is the caller's.
Import-light (no transformers): the plugin loads it inside slime's Ray actor.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pyhelpers.policy.prompt_builder import ContextBudgetError, PromptBuilder, Transcript
from pyhelpers.policy.sglang_client import GenerateResult, SGLangRejected
from pyhelpers.shopsim.actions import extract_action, persona_observation
from pyhelpers.shopsim.protocol import StepResult

Generate = Callable[[list[int], dict], Awaitable[GenerateResult]]
Interact = Callable[[str], Awaitable[StepResult]]


@dataclass(frozen=True)
class TurnLimits:
    max_turns: int
    max_context_len: int      # ROLLOUT_MAX_CONTEXT_LEN: prompt + every turn
    max_response_len: int     # ROLLOUT_MAX_RESPONSE_LEN: one generation


@dataclass(frozen=True)
class Ending:
    termination: str                 # done | over | max_turns | context_budget | aborted
    step: StepResult | None = None   # the simulator's answer that ended it (done, over)


def never() -> bool:
    return False


async def play_turns(builder: PromptBuilder, tr: Transcript, task: dict, *, limits: TurnLimits, sampling: dict,
                     generate: Generate, interact: Interact, turns: list[dict],
                     stop: Callable[[], bool] = never) -> Ending:
    """Play `task` on transcript `tr` (its prompt already built) until it ends; each turn is
    appended to `turns` as {"response", "action"?, "observation"?} (the spool's episode turns)."""
    for _ in range(limits.max_turns):
        if stop():
            return Ending("aborted")
        budget = builder.max_new_tokens(tr, limits.max_context_len, limits.max_response_len)
        if budget <= 0:
            return Ending("context_budget")
        try:
            out = await generate(tr.token_ids, {**sampling, "max_new_tokens": budget})
        except SGLangRejected:  # prompt + max_new_tokens beyond the server's context length
            return Ending("context_budget")
        reply = out.reply(builder.decode)
        builder.add_response(tr, out.output_ids, logprobs=out.logprobs, text=reply)
        if out.aborted:
            return Ending("aborted")
        turn = {"response": reply}
        action = extract_action(reply)
        if action is not None:
            turn["action"] = str(action)
        turns.append(turn)
        step = await interact(reply)
        if step.done or step.over:
            return Ending("done" if step.done else "over", step)
        observation = step.observation
        if task.get("scenario") == "persona" and task.get("instruction_simple"):
            observation = persona_observation(observation, task["instruction_simple"])
        turn["observation"] = observation
        try:
            builder.add_observation(tr, observation, max_context_len=limits.max_context_len)
        except ContextBudgetError:
            return Ending("context_budget")
    return Ending("max_turns")
