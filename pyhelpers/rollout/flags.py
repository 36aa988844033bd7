"""The slime flags the training loop must pass so that slime runs this plugin.

Checked against slime v0.3.1 (624b824): every flag is in pyhelpers/launch/slime_flags.py SLIME_TRAIN_FLAGS
(slime ignores unknown flags silently, so the loop's builder refuses any other).

- `--rollout-function-path pyhelpers.rollout.rollout.generate_rollout`: our per-step wrapper around
  slime's own `slime.rollout.sglang_rollout.generate_rollout`. It knows the step's rollout id
  (the spool record id needs it; `Sample.rollout_id` is not the step), waits for the step's
  full-skill retries, and returns `rollout/shopsim/*` in `RolloutFnTrainOutput.metrics`, which
  slime logs on `rollout/step` together with its own `rollout/*` figures.
- `--custom-generate-function-path pyhelpers.rollout.generate.generate`: one multi-turn
  ShopSimulator episode per Sample inside slime's default loop (over-sampling, dynamic filter,
  abort of the over-sampled rest all stay slime's).
- `--input-key instruction --label-key task_id`: slime's Dataset reads the task JSONL
  (schemas/task.schema.json) so that `Sample.prompt` is the instruction and `Sample.label` the
  task id; the plugin maps the task id to its ShopSimulator index through the task file.

Not here, because they come from the configuration: `--prompt-data <TRAIN_TASKS>` and
`--custom-config-path <round dir>/slime.yaml` (the loop's own flags), and the dynamic-sampling
flags (launch_args.py). No `--apply-chat-template`: the plugin renders the chat template itself.
"""

from __future__ import annotations

ROLLOUT_FUNCTION = "pyhelpers.rollout.rollout.generate_rollout"
GENERATE_FUNCTION = "pyhelpers.rollout.generate.generate"
INPUT_KEY = "instruction"
LABEL_KEY = "task_id"


def plugin_flags() -> list[str]:
    """Flags (with values) the slime command line needs for the plugin."""
    return [
        "--rollout-function-path", ROLLOUT_FUNCTION,
        "--custom-generate-function-path", GENERATE_FUNCTION,
        "--input-key", INPUT_KEY,
        "--label-key", LABEL_KEY,
    ]
