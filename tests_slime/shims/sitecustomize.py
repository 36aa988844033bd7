"""Test-only shims for slime's real train.py on a machine without a GPU (make test-slime only).

On PYTHONPATH only for the rollout-only job of tests_slime/rollout_job.py (its driver and the
Ray workers of the test's own Ray head), and active only with SHOPSIMRL_SLIME_SHIMS=1. Each shim is
listed in tests/fakes/README.md with the real file:line it stands in for and why that is safe.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import types


def _no_memory_saver() -> None:
    """slime/backends/megatron_utils/actor.py:12 imports torch_memory_saver at module level (a CUDA
    extension); rollout-only mode returns from the actor's init before it is used (actor.py:67)."""
    mod = types.ModuleType("torch_memory_saver")

    class _Refused:
        def __getattr__(self, name):
            raise RuntimeError(f"torch_memory_saver.{name}: the slime lane's shim has no memory saver "
                               "(tests_slime/shims/sitecustomize.py)")

    mod.torch_memory_saver = _Refused()
    sys.modules.setdefault("torch_memory_saver", mod)


def _cpu_accelerator(acc: types.ModuleType) -> None:
    """slime picks its accelerator once per process (slime/utils/accelerator/__init__.py:176-201)
    and refuses a machine without a GPU: the Megatron actor's __init__ asks it for the local GPU id
    (slime/ray/train_actor.py:45 -> accelerator.resolve_visible_device_id) and its init selects the
    device (train_actor.py:56 set_device). Installed through slime's own set_accelerator: CUDA's
    backend, available, with a set_device that selects nothing. Rollout-only mode puts no tensor
    on a device (the actor returns at once, megatron_utils/actor.py:67)."""
    from slime.utils.accelerator.cuda import CUDAAccelerator

    class CPUStandIn(CUDAAccelerator):
        def is_available(self) -> bool:
            return True

        def set_device(self, index) -> None:
            return None

    acc.set_accelerator(CPUStandIn())


_AFTER_IMPORT = {"slime.utils.accelerator": _cpu_accelerator}


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    """Runs _AFTER_IMPORT[name] on a module right after its own code ran."""

    def find_spec(self, name, path, target=None):
        if name not in _AFTER_IMPORT:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        real_exec = spec.loader.exec_module

        def exec_module(module):
            real_exec(module)
            _AFTER_IMPORT[name](module)

        spec.loader.exec_module = exec_module
        return spec


if os.environ.get("SHOPSIMRL_SLIME_SHIMS") == "1":
    _no_memory_saver()
    sys.meta_path.insert(0, _PatchAfterImport())
