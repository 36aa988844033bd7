"""Peak disk use of a round's stages on TRAIN_SAVE's disk (architecture §7), as numbers and arithmetic.

Pure: sizes in, a Plan out, no filesystem access, except `params_from_hf_dir`, which reads two
small JSON files of the base model. `make doctor` uses it now; the training loop calls the same
functions before each round and before export, with what the run already holds.

Sizes for Qwen3.5-4B (≈ 4.2 B parameters): a Megatron checkpoint is 2 bytes/parameter with
weights only (bf16, ≈ 8.4 GB), ≈ 14 bytes/parameter with optimizer state (fp32 master + two Adam
moments, ≈ 59 GB); an HF export is 2 bytes/parameter (≈ 8.4 GB). GB here is 10^9 bytes.

At most two checkpoints and two HF exports ever coexist, and never both pairs at once, because
rotation runs right after training (architecture §4):

    save     new checkpoint + old checkpoint + old HF export
    export   checkpoint + old HF export + new HF export

One checkpoint per round, also when the training split holds fewer than STEPS_PER_ROUND x
ROLLOUT_GROUPS tasks: slime 624b824 saves at every pass over the data only when --num-epoch sets
the rollout count (num_rollout_per_epoch, slime/ray/placement_group.py:239-243; utils/misc.py:
107-128). The toolkit passes --num-rollout (launch/slime_args.py), so slime saves at --save-interval
= STEPS_PER_ROUND and at the last rollout only, and its data source just reshuffles at the end of
a pass (rollout/data_source.py:90-101). tests/test_manifest_and_args.py keeps it so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

GB = 10**9
DEFAULT_PARAMS = 4_200_000_000  # Qwen3.5-4B, architecture §7
WEIGHT_BYTES = 2  # bf16 weights, per parameter
OPTIM_BYTES = 14  # bf16 weights + fp32 master + two fp32 Adam moments, per parameter
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float8_e4m3fn": 1}


def gb(n: float) -> str:
    """Bytes as GB with one decimal, e.g. '8.4 GB'."""
    return f"{n / GB:.1f} GB"


@dataclass(frozen=True)
class Sizes:
    params: int
    params_source: str  # where the parameter count came from, for the explanation
    save_optim: bool
    checkpoint: int  # bytes of one Megatron checkpoint
    hf_export: int  # bytes of one HF export

    def describe(self) -> str:
        per = OPTIM_BYTES if self.save_optim else WEIGHT_BYTES
        kind = "with optimizer state (SAVE_OPTIM=1)" if self.save_optim else "weights only (SAVE_OPTIM=0)"
        return (f"{self.params / 1e9:.2f} B parameters ({self.params_source}); checkpoint {kind} = "
                f"{per} B/param = {gb(self.checkpoint)}; HF export = {WEIGHT_BYTES} B/param = {gb(self.hf_export)}")


def sizes(params: int = DEFAULT_PARAMS, save_optim: bool = False, source: str = "architecture §7 default") -> Sizes:
    per = OPTIM_BYTES if save_optim else WEIGHT_BYTES
    return Sizes(params, source, save_optim=save_optim, checkpoint=params * per, hf_export=params * WEIGHT_BYTES)


@dataclass(frozen=True)
class Plan:
    sizes: Sizes
    stages: tuple[tuple[str, int, str], ...]  # (stage, bytes at its peak, the sum written out)
    peak: int  # the largest stage
    held: int  # bytes the run already holds on that disk (counted inside the peak)
    margin: int

    @property
    def need_free(self) -> int:
        """Free bytes the disk must have now: the peak, minus what the run holds, plus the margin."""
        return max(self.peak - self.held, 0) + self.margin

    def lines(self) -> list[str]:
        out = [self.sizes.describe()]
        out += [f"{stage}: {text} = {gb(n)}" for stage, n, text in self.stages]
        out.append(f"peak {gb(self.peak)} - held by this run {gb(self.held)} + margin {gb(self.margin)} "
                   f"= {gb(self.need_free)} must be free")
        return out


def round_plan(sz: Sizes, margin_gb: float, held_bytes: int = 0) -> Plan:
    """Steady-state peak of one round: the worst of the save and the export stage."""
    c, h = sz.checkpoint, sz.hf_export
    c_, h_ = gb(c), gb(h)
    stages = (
        ("save", 2 * c + h, f"new checkpoint {c_} + old checkpoint {c_} + old HF export {h_}"),
        ("export", c + 2 * h, f"checkpoint {c_} + old HF export {h_} + new HF export {h_}"),
    )
    return Plan(sz, stages, peak=max(n for _, n, _ in stages), held=held_bytes, margin=int(margin_gb * GB))


def fits(plan: Plan, free_bytes: int) -> bool:
    return free_bytes >= plan.need_free


def params_from_hf_dir(hf_dir: Path) -> tuple[int, str] | None:
    """Parameter count of an HF model dir, or None when it cannot be told.

    A dense-transformer formula over config.json is unreliable for Qwen3.5 (hybrid attention
    layers, optional vision tower), so the count is the weights' byte total (the safetensors
    index's metadata.total_size) divided by the bytes of config.json's dtype.
    """
    try:
        cfg = json.loads((hf_dir / "config.json").read_text(encoding="utf-8"))
        index = json.loads((hf_dir / "model.safetensors.index.json").read_text(encoding="utf-8"))
        total = int(index["metadata"]["total_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    text_cfg = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or text_cfg.get("torch_dtype")
                or text_cfg.get("dtype") or "bfloat16")
    per = DTYPE_BYTES.get(dtype, 2)
    if total <= 0:
        return None
    return total // per, f"{hf_dir.name}: index total_size {gb(total)} / {per} B ({dtype})"


def model_sizes(hf_dir: Path, save_optim: bool) -> Sizes:
    """Sizes of the base model in hf_dir (its index), or of the documented 4.2 B when it has none."""
    got = params_from_hf_dir(Path(hf_dir))
    params, source = got if got else (DEFAULT_PARAMS, "documented 4.2 B, no index in HF_MODEL")
    return sizes(params, save_optim, source)
