"""Writes Megatron's torch_dist checkpoint layout as slime's --save does (Megatron's
dist_checkpointing via slime/backends/megatron_utils/checkpoint.py at 624b824):
DIR/iter_%07d/{__0_0.distcp, .metadata, common.pt}, then DIR/latest_checkpointed_iteration.txt,
then DIR/rollout/global_dataset_state_dict_<id>.pt (slime 624b824 train.py:71-80). Bytes are a
pure function of the iteration, so
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
                     optim: bool = False, state: bool = True) -> Path:
    """In slime's order: the torch_dist files, the tracker (Megatron checkpointing.py:703-767), then
    -- with `state` -- the data source's rollout/global_dataset_state_dict_<iteration>.pt, which
    slime writes after the whole Megatron save (train.py:71-80; the fake train.py writes it through
    its data source instead)."""
    megatron = Path(megatron)
    d = megatron / f"iter_{iteration:07d}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "__0_0.distcp").write_bytes(shard_bytes(iteration))
    if optim:
        (d / OPTIM_SHARD).write_bytes(shard_bytes(iteration, 8192, "optimizer"))
    (d / "common.pt").write_bytes(f"common-{iteration}".encode())
    if complete:
        (d / ".metadata").write_bytes(f"metadata-{iteration}".encode())
    if tracker and complete:
        write_tracker(megatron, str(iteration))
    if state:
        (megatron / "rollout").mkdir(exist_ok=True)
        (megatron / "rollout" / f"global_dataset_state_dict_{iteration}.pt").write_bytes(f"data-{iteration}".encode())
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
# The base model's weight names, Qwen3.5-shaped: the language model, which Megatron trains and the
# converter writes back, and the visual tower, which slime's Megatron model does not hold -- the
# converter copies it from the original HF dir only with --add-missing-from-origin-hf (slime
# tools/convert_torch_dist_to_hf.py:128-140,192-194); slime's --save-hf never does.
LANGUAGE_WEIGHTS = ("model.language_model.embed_tokens.weight", "model.language_model.layers.0.mlp.up_proj.weight",
                    "model.language_model.norm.weight")
VISUAL_WEIGHTS = ("model.visual.patch_embed.proj.weight", "model.visual.blocks.0.attn.qkv.weight")


def in_megatron(name: str) -> bool:
    return not name.startswith("model.visual.")


def write_safetensors(path: Path, tensors: dict[str, bytes]) -> None:
    """The safetensors layout (8-byte little-endian header length, JSON header, data), U8 tensors."""
    header, offset = {}, 0
    for name, data in tensors.items():
        header[name] = {"dtype": "U8", "shape": [len(data)], "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    raw = json.dumps(header).encode()
    Path(path).write_bytes(len(raw).to_bytes(8, "little") + raw + b"".join(tensors.values()))


def read_safetensors(path: Path) -> dict[str, bytes]:
    data = Path(path).read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    return {k: data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]
            for k, v in header.items() if k != "__metadata__"}


def _write_weights(path: Path, shards: dict[str, dict[str, bytes]]) -> None:
    weight_map, total = {}, 0
    for fname, tensors in shards.items():
        write_safetensors(path / fname, tensors)
        weight_map.update({k: fname for k in tensors})
        total += sum(len(v) for v in tensors.values())
    (path / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, indent=1) + "\n")


def write_hf(path: Path, iteration: int) -> Path:
    """A minimal HF export: config, one safetensors file + index."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text('{"model_type": "qwen3_5", "fake": true}\n')
    _write_weights(path, {HF_WEIGHT_FILE: {"w": shard_bytes(iteration, 1024)}})
    return path


def write_hf_base(out: Path, assets: Path) -> Path:
    """The base model (HF_MODEL): every file of `assets` (config, tokenizer, fake_policy.json) and
    the language and visual weights in two shards, with their index."""
    import shutil

    out, assets = Path(out), Path(assets)
    out.mkdir(parents=True, exist_ok=True)
    for f in sorted(assets.iterdir()):
        if f.is_file():
            shutil.copyfile(f, out / f.name)
    _write_weights(out, {
        "model-00001-of-00002.safetensors": {n: shard_bytes(-1, 512, n) for n in LANGUAGE_WEIGHTS},
        "model-00002-of-00002.safetensors": {n: shard_bytes(-1, 512, n) for n in VISUAL_WEIGHTS}})
    return out


def origin_weights(origin_hf: Path) -> dict[str, bytes]:
    """Every tensor of an HF dir's safetensors files, by name."""
    out = {}
    for f in sorted(Path(origin_hf).glob("*.safetensors")):
        out.update(read_safetensors(f))
    return out


# The fake model "learns": an export of iteration i carries the base model's fake_policy.json with
# base_success raised by LEARN_PER_STEP per trained step (capped), so later rounds' val improves.
LEARN_PER_STEP, LEARN_CAP = 0.02, 0.7


def learned_policy(spec: dict, iteration: int | None) -> dict:
    if iteration is None or "base_success" not in spec:
        return dict(spec)
    base = float(spec["base_success"])
    return {**spec, "base_success": round(min(LEARN_CAP, max(base, base + LEARN_PER_STEP * (iteration + 1))), 6)}


def write_hf_export(out: Path, origin_hf: Path, iteration: int, add_missing: bool = False,
                    language: bool = True, report=lambda line: None) -> Path:
    """HF weights of `iteration` as slime's exporters write them: every non-weight file of the
    origin HF dir copied (config, tokenizer, the fake policy -- learned), the weights Megatron
    holds (the origin's names that in_megatron() keeps; bytes a function of the iteration) and,
    with add_missing (the converter's -a), every other origin tensor as it is, each reported as the
    real converter prints it. One shard + index. language=False: a broken converter that writes none
    of the trained weights (test-only), so -a copies the base model's."""
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
    origin = origin_weights(origin_hf) or {"model.embed_tokens.weight": b""}
    tensors = {n: shard_bytes(iteration, 512, n) for n in origin if in_megatron(n) and language}
    if add_missing:
        for n, v in origin.items():
            if n not in tensors:
                report(f"add {n} from origin hf checkpoint")  # slime tools/convert_torch_dist_to_hf.py:133
                tensors[n] = v
    _write_weights(out, {HF_WEIGHT_FILE: tensors})
    return out
