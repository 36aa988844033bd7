"""What a base model's directories must hold before slime's converter or a job reads them (M18):
the HF dir (config, tokenizer, the shards its index names) and the torch_dist dir (tracker or
release/). `make doctor` and `make convert-base` both ask here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

TOKENIZER_SETS = (("tokenizer.json",), ("tokenizer.model",), ("vocab.json", "merges.txt"))


def hf_problems(hf: Path) -> tuple[list[str], list[str]]:
    """(problems, facts) of an HF model dir: config, tokenizer, safetensors consistent with the index."""
    if not hf.is_dir():
        return [f"{hf} does not exist"], []
    problems, facts = [], []
    if not (hf / "config.json").is_file():
        problems.append("config.json missing")
    if not any(all((hf / f).is_file() for f in files) for files in TOKENIZER_SETS):
        problems.append("no tokenizer (tokenizer.json, tokenizer.model or vocab.json + merges.txt)")
    shards = sorted(p.name for p in hf.glob("*.safetensors"))
    index = hf / "model.safetensors.index.json"
    if index.is_file():
        try:
            wanted = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError):
            problems.append(f"{index.name} is not a valid safetensors index")
            wanted = []
        missing = [w for w in wanted if not (hf / w).is_file() or (hf / w).stat().st_size == 0]
        if missing:
            problems.append(f"{len(missing)} of {len(wanted)} shard(s) named in {index.name} missing or empty: "
                            + ", ".join(missing[:3]) + (" ..." if len(missing) > 3 else ""))
        facts.append(f"{len(wanted)} shard(s) per {index.name}")
    elif not shards:
        problems.append("no *.safetensors weights")
    else:
        facts.append(f"{len(shards)} safetensors file(s), no index")
    return problems, facts


def dist_problems(dist: Path) -> tuple[list[str], str]:
    """([], what was found) for a Megatron torch_dist dir with its tracker or a release/ dir."""
    if not dist.is_dir():
        return [f"{dist} does not exist"], ""
    tracker = dist / "latest_checkpointed_iteration.txt"
    if tracker.is_file():
        text = tracker.read_text(encoding="utf-8").strip()
        sub = "release" if text == "release" else (f"iter_{int(text):07d}" if re.fullmatch(r"\d+", text) else "")
        if not sub:
            return [f"{tracker.name} holds {text!r}, not an iteration"], ""
        if not (dist / sub).is_dir():
            return [f"{tracker.name} names {sub}, which is missing"], ""
        return [], f"{tracker.name} -> {sub}"
    if (dist / "release").is_dir():
        return [], "release/"
    return [f"neither latest_checkpointed_iteration.txt nor release/ in {dist}"], ""
