"""Writes Megatron's torch_dist checkpoint layout as slime's --save does (Megatron's
dist_checkpointing via slime/backends/megatron_utils/checkpoint.py at 624b824):
DIR/iter_%07d/{__0_0.distcp, .metadata, common.pt}, DIR/rollout/global_dataset_state_dict_<id>.pt,
then DIR/latest_checkpointed_iteration.txt last. Bytes are a pure function of the iteration, so
"the same as an uninterrupted run" can be compared byte for byte. Used by the fake slime train.py,
the fake converters and by tests that need checkpoints on disk. Stdlib only.

A save with optimizer state (no --no-save-optim) adds an `__0_1.distcp` shard holding it; the
fake train.py refuses to load a checkpoint without that shard unless --no-load-optim is given,
as Megatron does."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

OPTIM_SHARD = "__0_1.distcp"


def shard_bytes(iteration: int, size: int = 4096, kind: str = "weights") -> bytes:
    seed = hashlib.sha256(f"{kind}-{iteration}".encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def write_tracker(megatron: Path, value: str) -> None:
    tmp = Path(megatron) / ".tracker.tmp"
    tmp.write_text(value)
    os.replace(tmp, Path(megatron) / "latest_checkpointed_iteration.txt")


def write_checkpoint(megatron: Path, iteration: int, *, tracker: bool = True, complete: bool = True,
                     optim: bool = False, rollout_state: bytes | None = None) -> Path:
    megatron = Path(megatron)
    d = megatron / f"iter_{iteration:07d}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "__0_0.distcp").write_bytes(shard_bytes(iteration))
    if optim:
        (d / OPTIM_SHARD).write_bytes(shard_bytes(iteration, 8192, "optimizer"))
    (d / "common.pt").write_bytes(f"common-{iteration}".encode())
    if complete:
        (d / ".metadata").write_bytes(f"metadata-{iteration}".encode())
    (megatron / "rollout").mkdir(exist_ok=True)
    state = rollout_state if rollout_state is not None else f"data-{iteration}".encode()
    (megatron / "rollout" / f"global_dataset_state_dict_{iteration}.pt").write_bytes(state)
    if tracker and complete:
        write_tracker(megatron, str(iteration))
    return d


def write_release(save: Path) -> Path:
    """What tools/convert_hf_to_torch_dist.py leaves: SAVE/release/ and a tracker saying 'release'."""
    save = Path(save)
    d = save / "release"
    d.mkdir(parents=True, exist_ok=True)
    (d / "__0_0.distcp").write_bytes(shard_bytes(0, kind="base"))
    (d / "common.pt").write_bytes(b"common-release")
    (d / ".metadata").write_bytes(b"metadata-release")
    write_tracker(save, "release")
    return d


HF_WEIGHT_FILE = "model-00001-of-00001.safetensors"


def write_hf(path: Path, iteration: int) -> Path:
    """A minimal HF export: config, tokenizer placeholder, one safetensors file + index."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text('{"model_type": "qwen3_5", "fake": true}\n')
    (path / HF_WEIGHT_FILE).write_bytes(shard_bytes(iteration, 1024))
    (path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": HF_WEIGHT_FILE}}) + "\n")
    return path


# The fake model "learns": an export of iteration i carries the base model's fake_policy.json with
# base_success raised by LEARN_PER_STEP per trained step (capped), so later rounds' val improves.
LEARN_PER_STEP, LEARN_CAP = 0.02, 0.7


def learned_policy(spec: dict, iteration: int | None) -> dict:
    if iteration is None or "base_success" not in spec:
        return dict(spec)
    base = float(spec["base_success"])
    return {**spec, "base_success": round(min(LEARN_CAP, max(base, base + LEARN_PER_STEP * (iteration + 1))), 6)}


def write_hf_export(out: Path, origin_hf: Path, iteration: int) -> Path:
    """HF weights of `iteration` as slime's exporters write them: every non-weight file of the
    origin HF dir copied (config, tokenizer, the fake policy — learned), one safetensors shard and
    its index. Weight bytes are a function of the iteration."""
    import shutil

    out, origin_hf = Path(out), Path(origin_hf)
    out.mkdir(parents=True, exist_ok=True)
    for f in sorted(origin_hf.iterdir()):
        if f.is_file() and not f.name.endswith(".safetensors") and f.name != "model.safetensors.index.json":
            shutil.copyfile(f, out / f.name)
    policy = origin_hf / "fake_policy.json"
    if policy.is_file():
        spec = learned_policy(json.loads(policy.read_text(encoding="utf-8")), iteration)
        (out / "fake_policy.json").write_text(json.dumps(spec, ensure_ascii=False, indent=1), encoding="utf-8")
    (out / HF_WEIGHT_FILE).write_bytes(shard_bytes(iteration, 1024))
    (out / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": 1024}, "weight_map": {"model.embed_tokens.weight": HF_WEIGHT_FILE}}) + "\n")
    return out
