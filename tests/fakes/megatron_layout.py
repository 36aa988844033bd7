"""Writes Megatron's torch_dist checkpoint layout as slime's --save does (slime-interface.md §4):
DIR/iter_%07d/{__0_0.distcp, .metadata, common.pt}, DIR/rollout/global_dataset_state_dict_<id>.pt,
then DIR/latest_checkpointed_iteration.txt last. Bytes are a pure function of the iteration, so
"the same as an uninterrupted run" can be compared byte for byte. Used by the fake slime train.py
and by tests that need checkpoints on disk. Stdlib only."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def shard_bytes(iteration: int, size: int = 4096) -> bytes:
    seed = hashlib.sha256(f"weights-{iteration}".encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def write_checkpoint(megatron: Path, iteration: int, *, tracker: bool = True, complete: bool = True) -> Path:
    megatron = Path(megatron)
    d = megatron / f"iter_{iteration:07d}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "__0_0.distcp").write_bytes(shard_bytes(iteration))
    (d / "common.pt").write_bytes(f"common-{iteration}".encode())
    if complete:
        (d / ".metadata").write_bytes(f"metadata-{iteration}".encode())
    (megatron / "rollout").mkdir(exist_ok=True)
    (megatron / "rollout" / f"global_dataset_state_dict_{iteration}.pt").write_bytes(f"data-{iteration}".encode())
    if tracker and complete:
        tmp = megatron / ".tracker.tmp"
        tmp.write_text(str(iteration))
        os.replace(tmp, megatron / "latest_checkpointed_iteration.txt")
    return d


def write_hf(path: Path, iteration: int) -> Path:
    """A minimal HF export: config, tokenizer placeholder, one safetensors file + index."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text('{"model_type": "qwen3_5", "fake": true}\n')
    (path / "model-00001-of-00001.safetensors").write_bytes(shard_bytes(iteration, 1024))
    (path / "model.safetensors.index.json").write_text(
        '{"weight_map": {"w": "model-00001-of-00001.safetensors"}}\n')
    return path
