"""Cut 6 of issue 29: an HF export without the converter. slime's --save-hf writes the weights
its Megatron model holds, not Qwen3.5's visual tower nor mtp.* (slime 624b824
slime/backends/megatron_utils/hf_checkpoint_saver.py:78). With SAVE_HF=1 the export stage
completes that directory from HF_MODEL by hard links (no copy, no extra disk) and verifies it
name by name and shape by shape against HF_MODEL; when anything differs it says why and the
stage falls back to the converter.

Hard links need HF_MODEL's shard files to hold only weights the trained model lacks (a shard that
mixes them cannot be linked: it would bring the base model's trained weights back) and the same
file system as TRAIN_SAVE.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pyhelpers.jsonfiles import write_json_atomic
from pyhelpers.run import checkpoints

LINKED = "origin-"  # prefix of the shard files linked from HF_MODEL


def tensor_specs(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """{name: (dtype, shape)} from one safetensors file's header."""
    with open(path, "rb") as fh:
        size = int.from_bytes(fh.read(8), "little")
        if not 2 <= size <= 100_000_000:
            raise ValueError(f"{path.name}: header length {size}")
        header = json.loads(fh.read(size))
    return {k: (str(v["dtype"]), tuple(int(x) for x in v["shape"])) for k, v in header.items() if k != "__metadata__"}


def model_specs(hf_dir: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """{name: (dtype, shape)} of every weight an HF dir's index (or its shards) names."""
    out: dict[str, tuple[str, tuple[int, ...]]] = {}
    for fname in sorted(set(checkpoints.weight_names(hf_dir).values())):
        out.update(tensor_specs(Path(hf_dir) / fname))
    return out


def mismatches(target: Path, origin: Path) -> list[str]:
    """Name by name and shape by shape: what differs between an export and the model it came from."""
    try:
        got, want = model_specs(target), model_specs(origin)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [f"unreadable weights: {exc}"]
    out = [f"{n} missing" for n in sorted(set(want) - set(got))]
    out += [f"{n} is not in HF_MODEL" for n in sorted(set(got) - set(want))]
    out += [f"{n}: {got[n][0]}{list(got[n][1])} where HF_MODEL has {want[n][0]}{list(want[n][1])}"
            for n in sorted(set(got) & set(want)) if got[n] != want[n]]
    return out


def complete(target: Path, origin: Path) -> tuple[bool, str]:
    """Complete slime's --save-hf export `target` from `origin` (HF_MODEL) by hard links and verify
    it. (True, what was linked) or (False, why not: the caller converts instead)."""
    target, origin = Path(target), Path(origin)
    try:
        have, orig = checkpoints.weight_names(target), checkpoints.weight_names(origin)
    except (OSError, ValueError) as exc:
        return False, f"unreadable index: {exc}"
    missing = sorted(set(orig) - set(have))
    tied = checkpoints.ties_embeddings(origin)
    held = [n for n in missing if checkpoints.trained_model_holds(n, tied)]
    if held:
        return False, f"the --save-hf export lacks {held[0]}, a weight the trained model holds"
    files = sorted({orig[n] for n in missing})
    for f in files:
        other = sorted(n for n, ff in orig.items() if ff == f and n not in missing)
        if other:
            return False, f"HF_MODEL's {f} also holds {other[0]}, a trained weight: it cannot be linked"
    linked = []
    try:
        for f in files:
            dst = target / f"{LINKED}{f}"
            dst.unlink(missing_ok=True)
            os.link(origin / f, dst)
            linked.append(dst)
    except OSError as exc:
        for p in linked:
            p.unlink(missing_ok=True)
        return False, f"cannot hard-link HF_MODEL's shards into {target} ({exc.strerror}: another file system?)"
    if missing:
        weight_map = {**have, **{n: f"{LINKED}{orig[n]}" for n in missing}}
        total = sum((target / f).stat().st_size for f in set(weight_map.values()))
        write_json_atomic(target / "model.safetensors.index.json",
                          {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))})
    bad = mismatches(target, origin)
    if bad:
        return False, f"the completed --save-hf export differs from HF_MODEL: {bad[0]}"
    return True, (f"--save-hf export completed from HF_MODEL by hard links: {len(missing)} weight(s) in "
                  f"{len(files)} file(s); every name and shape matches HF_MODEL")
