"""slime.utils.misc: load_function (dotted `module.attr` only) and SingletonMeta."""

import importlib
from functools import cache


@cache
def load_function(path):
    module_path, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(module_path), attr)


class SingletonMeta(type):
    _instances = {}

    def __call__(cls, *args, **kwargs):
        if cls not in cls._instances:
            cls._instances[cls] = super().__call__(*args, **kwargs)
        return cls._instances[cls]

    def clear_instances(cls):
        cls._instances = {}


def should_run_periodic_action(rollout_id, interval, num_rollout_per_epoch=None, num_rollout=None):
    """slime/utils/misc.py:107-128 (624b824): a periodic action (save, eval) is due after rollout
    `rollout_id` when its interval is set and the rollout count so far is a multiple of it, or the
    count ends an epoch, or -- only where the caller passes num_rollout (the save does, the eval
    hook does not: train.py:71-72, 90) -- it is the run's last rollout."""
    if interval is None:
        return False
    if num_rollout is not None and rollout_id == num_rollout - 1:
        return True
    done = rollout_id + 1
    return done % interval == 0 or (num_rollout_per_epoch is not None and done % num_rollout_per_epoch == 0)
