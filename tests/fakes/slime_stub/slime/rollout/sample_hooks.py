"""slime.rollout.sample_hooks: the step's rollout id, set by RolloutManager.generate/eval."""

_current_rollout_id = None


def set_current_rollout_id(rollout_id):
    global _current_rollout_id
    _current_rollout_id = rollout_id
