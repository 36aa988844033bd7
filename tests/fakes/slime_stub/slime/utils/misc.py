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
