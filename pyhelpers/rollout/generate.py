"""slime's per-sample hook: `--custom-generate-function-path pyhelpers.rollout.generate.generate`.

slime's default rollout (slime.rollout.sglang_rollout.generate_and_rm) awaits
`generate(args, sample, sampling_params)` for every Sample under its own semaphore, on its one
event loop; over-sampled Samples that are not needed any more are aborted by slime at the end of
the step (GenerateState.aborted, and an engine-side abort of in-flight /generate calls).

The Sample slime gets back (fields of slime.utils.types.Sample):
- tokens = prompt ids + response ids, response_length = len(response ids), loss_mask and
  rollout_log_probs one per response token (policy tokens: mask 1 and SGLang's log-prob;
  observation tokens: mask 0 and 0.0); response = the text of those tokens; prompt = the
  rendered prompt text.
- reward = the configured score (REWARD: strict | loose | success) as a float, which is what
  slime's check_reward_nonzero_std filter and GRPO read (Sample.get_reward_value, no reward_key).
  Unscored episodes get 0.0 so that no group ever holds a None.
- status: COMPLETED (done / over), TRUNCATED (max_turns / context_budget), ABORTED (slime's abort),
  FAILED (ShopSimulator or SGLang failure, or a timeout). ABORTED and FAILED samples also get
  remove_sample=True: not the policy's doing, so never trained on (their loss mask becomes 0 in
  slime) and counted nowhere: groups.normalized_rewards takes the group's reward mean/std over
  its trained episodes only and gives removed ones advantage 0 (docs/training.md, "Removed
  episodes"). A response with no token at all gets one masked pad token, because slime
  slices responses as tokens[-response_length:] and a length of 0 would take the whole sequence.
- metadata["shopsim"]: task_id, termination, turns, strict, loose, success, skills_shown, error.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pyhelpers.errors import ToolkitError
from pyhelpers.rollout import metrics, retry, runtime, settings, slime_compat
from pyhelpers.rollout.episode import Episode, play
from pyhelpers.rollout.metrics import SCORED, EpisodeStats

STATUS = {"done": "COMPLETED", "over": "COMPLETED", "max_turns": "TRUNCATED", "context_budget": "TRUNCATED",
          "aborted": "ABORTED", "timeout": "FAILED", "infra_error": "FAILED"}


async def generate(args: Any, sample: Any, sampling_params: dict) -> Any:
    """Play the Sample's task (Sample.label = task_id) with the round's active skills."""
    step = metrics.current(slime_compat.current_rollout_id())
    s = settings.from_args(args).for_rollout(step.rollout_id)
    rt = runtime.get(args, s)
    task = rt.tasks.get(str(sample.label))
    if task is None:
        raise ToolkitError(f"task {sample.label!r} (Sample.label) is not in the training tasks", s.tasks_path,
                           "pass --prompt-data and the plugin's tasks_path from the same TRAIN_TASKS "
                           "with --label-key task_id (pyhelpers/rollout/flags.py)")

    def aborted() -> bool:
        return slime_compat.step_aborted(args)

    try:
        ep = await play(rt, task, skills=rt.active, sampling_params=sampling_params, slots=rt.episodes, skip=aborted, aborted=aborted)
    except asyncio.CancelledError:
        step.add(EpisodeStats("aborted", 0))
        raise
    step.add(ep.stats())
    fill_sample(sample, ep, rt=rt, task=task)
    if ep.scored and not ep.success:
        retry.schedule(rt, step, sample=sample, task=task, failed=ep, sampling_params=sampling_params)
    return sample


def fill_sample(sample: Any, ep: Episode, rt: runtime.Runtime, task: dict) -> None:
    """Write the episode into slime's Sample (fields as slime.utils.types.Sample names them)."""
    Status = slime_compat.sample_status()
    tr = ep.transcript
    if tr is None:  # no prompt could be built: one pad token each side, removed from training
        prompt_ids, prompt_text, resp_ids, mask, logprobs, text = [rt.pad_id], "", [], [], [], ""
    else:
        prompt_ids, prompt_text = tr.token_ids[:tr.prompt_len], tr.prompt_text
        resp_ids, mask, logprobs = tr.response_ids, tr.response_mask, tr.response_logprobs
        text = tr.text[len(prompt_text):]
    if not resp_ids:
        resp_ids, mask, logprobs = [rt.pad_id], [0], [0.0]
    sample.prompt = prompt_text
    sample.tokens = list(prompt_ids) + list(resp_ids)
    sample.response = text
    sample.response_length = len(resp_ids)
    sample.loss_mask = list(mask)
    sample.rollout_log_probs = list(logprobs)
    sample.reward = float(ep.reward)
    sample.status = getattr(Status, STATUS[ep.termination])
    sample.remove_sample = ep.termination not in SCORED
    meta = dict(sample.metadata or {})
    meta["shopsim"] = {"task_id": str(task["task_id"]), "termination": ep.termination, "turns": len(ep.turns),
                       "strict": ep.scores.strict, "loose": ep.scores.loose, "success": ep.success,
                       "skills_shown": list(ep.skills_shown), "error": ep.error}
    sample.metadata = meta
