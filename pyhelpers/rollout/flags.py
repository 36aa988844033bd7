"""The slime flags the training loop must pass so that slime runs this plugin.

Checked against slime v0.3.1 (624b824): every flag is in pyhelpers/launch/slime_flags.py SLIME_TRAIN_FLAGS
(slime ignores unknown flags silently, so the loop's builder refuses any other).

- `--rollout-function-path pyhelpers.rollout.rollout.generate_rollout`: our per-step wrapper around
  slime's own `slime.rollout.sglang_rollout.generate_rollout`. It knows the step's rollout id
  (the spool record id needs it; `Sample.rollout_id` is not the step), counts the groups the step
  draws, waits for the step's full-skill retries, and returns `rollout/shopsim/*` in
  `RolloutFnTrainOutput.metrics`, which slime logs on `rollout/step` together with its own
  `rollout/*` figures.
- `--custom-generate-function-path pyhelpers.rollout.generate.generate`: one multi-turn
  ShopSimulator episode per Sample inside slime's default loop (over-sampling, dynamic filter,
  abort of the over-sampled rest all stay slime's).
- `--dynamic-sampling-filter-path pyhelpers.rollout.groups.keep_group`: slime's non-zero-std filter
  over the episodes slime trains on, with a bound on the groups one step draws (groups.py says why).
- `--custom-reward-post-process-path pyhelpers.rollout.groups.normalized_rewards`: slime's GRPO
  group normalisation without the removed (FAILED/ABORTED) episodes (groups.py).
- `--input-key messages --label-key task_id`: slime's Dataset reads the task JSONL
  (schemas/task.schema.json): `Sample.prompt` is the line's `messages` list -- a list because
  Qwen3.5 has a processor and slime's Dataset asserts one then (pyhelpers/tasks/files.py) -- and
  `Sample.label` the task id; the plugin maps the task id to the task record and builds the prompt.

Not here, because they come from the configuration: `--prompt-data <TRAIN_TASKS>` and
`--custom-config-path <round dir>/slime.yaml` (the loop's own flags), and the over-sampling sizes
(pyhelpers/launch/slime_args.py). No `--apply-chat-template`: the plugin renders the chat template
itself, once per episode (pyhelpers/policy/prompt_builder.py).
"""

from __future__ import annotations

ROLLOUT_FUNCTION = "pyhelpers.rollout.rollout.generate_rollout"
GENERATE_FUNCTION = "pyhelpers.rollout.generate.generate"
DYNAMIC_FILTER = "pyhelpers.rollout.groups.keep_group"
REWARD_POST_PROCESS = "pyhelpers.rollout.groups.normalized_rewards"
# The one-job mode's eval hook (docs/one-job-mode.md; not on today's command line: no job evaluates)
EVAL_FUNCTION = "pyhelpers.rollout.in_job_eval.evaluate"
# slime logs the hook's rewards as eval/<EVAL_KEY>; also the name in --eval-prompt-data
EVAL_KEY = "shopsim_val"
INPUT_KEY = "messages"  # pyhelpers.tasks.files.SLIME_PROMPT_KEY (this module imports nothing)
LABEL_KEY = "task_id"


def plugin_flags() -> list[str]:
    """Flags (with values) the slime command line needs for the plugin."""
    return [
        "--rollout-function-path", ROLLOUT_FUNCTION,
        "--custom-generate-function-path", GENERATE_FUNCTION,
        "--dynamic-sampling-filter-path", DYNAMIC_FILTER,
        "--custom-reward-post-process-path", REWARD_POST_PROCESS,
        "--input-key", INPUT_KEY,
        "--label-key", LABEL_KEY,
    ]


def in_job_eval_flags(steps_per_round: int, val_tasks: str) -> list[str]:
    """What the one-job mode adds for its eval hook (slime 624b824): evaluate after each round's last
    rollout (train.py:90-91, `(rollout_id + 1) % --eval-interval == 0`), never before training
    (--skip-eval-before-train, which every job passes already); slime wants evaluation data named
    whenever --eval-interval is set (arguments.py:1840-1841), which the hook records but does not
    read (it plays the toolkit's val split from its YAML). No --save-debug-rollout-data: slime would
    save the evaluation's samples, which the hook does not return (in_job_eval.py)."""
    return ["--eval-interval", str(steps_per_round), "--eval-prompt-data", EVAL_KEY, str(val_tasks),
            "--eval-function-path", EVAL_FUNCTION]
