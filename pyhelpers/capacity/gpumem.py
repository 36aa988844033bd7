"""Peak GPU memory of one training micro-batch, per GPU, where the vocabulary logits dominate.

Pure and stdlib-only: `bench/logits_memory.py` imports this file on a GPU machine where only
torch exists, so the estimate has one source of truth. The derivation, the measurements that
confirm it and what each knob does are in docs/oom_qwen35_4b.md.

The logits path. A packed micro-batch of T tokens gives logits [T, V/TP] on every TP rank (the
output layer is split by vocabulary; sequence parallelism does not split them). What PyTorch
autograd keeps alive, in bytes per element of that tensor, step by step:

- ``reference`` (matmul -> bf16 logits -> ``.float()`` -> ``log_softmax`` -> gather -> sum, then
  backward): ``log_softmax`` saves its fp32 *output* for backward; gather's backward allocates a
  zero fp32 gradient of that shape; log-softmax's backward allocates its fp32 input-gradient while
  both are still alive: 4 + 4 + 4 = 12 bytes per element, the peak.
- ``slime`` (slime 624b824, ``slime/utils/ppo_utils.py::_VocabParallelLogProbEntropy``):
  Megatron's Float16Module hands over fp32 logits; the softmax is computed in one fp32 scratch
  buffer in place (sub, exp_, div_) and saved; backward turns that saved buffer into the gradient
  in place. Peak in forward: fp32 logits + saved softmax = 8 bytes per element.

Chunked variants (chunk = rows of T): ``reference-chunked`` splits the rows before the matmul but
still keeps every chunk's log-softmax output (4 T) and adds one chunk's two gradients (8 c);
``reference-recompute`` also recomputes each chunk in backward (torch.utils.checkpoint), so only
one chunk is ever alive (12 c); ``slime-chunked`` is slime's --log-probs-chunk-size, which slices
the already materialised fp32 logits: every chunk's softmax is saved (4 T) next to the logits
(4 T), and backward concatenates the chunk gradients into a new [T, V/TP] buffer (4 T + 4 T), so
the peak stays 8 T.

The other terms (weights, gradients, optimizer shards, activations, runtime) are rougher; each
says so in ``ROUGH``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyhelpers.errors import ToolkitError

GIB = 1024**3
TABLE_TOKENS = (4096, 8192, 16384, 24576, 32768)
TABLE_TP = (1, 2, 4)
TOKEN_STEP = 1024  # granularity of a suggested MAX_TOKENS_PER_GPU


@dataclass(frozen=True)
class Model:
    """The shapes the estimate needs. ``params`` is rough; the rest are exact model args."""

    name: str
    vocab: int
    hidden: int
    layers: int
    params: float
    max_tp: int  # TP may not exceed the number of KV (query) groups
    vocab_divisible_by: int = 128  # Megatron pads the vocab to a multiple of this x TP


# slime 624b824 scripts/models/qwen3.5-4B.sh: vocab 248,320, hidden 2,560, 32 layers,
# 4 query groups, tied embeddings. params ~4.2e9: the ~8.4 GB bf16 checkpoint / 2 bytes (rough).
QWEN35_4B = Model("Qwen3.5-4B", vocab=248_320, hidden=2_560, layers=32, params=4.2e9, max_tp=4)


@dataclass(frozen=True)
class Step:
    """One moment of the logits path and the bytes per logits element alive then."""

    what: str
    bytes_per_element: int


STEPS: dict[str, tuple[Step, ...]] = {
    "reference": (
        Step("forward: matmul writes bf16 logits", 2),
        Step("forward: .float() copy (bf16 + fp32)", 6),
        Step("forward: log_softmax (fp32 input + fp32 output, bf16 freed)", 8),
        Step("backward: gather grad (saved log_softmax output + its zero-filled grad)", 8),
        Step("backward: log_softmax grad (saved output + grad_output + grad_input)", 12),
        Step("backward: grad cast to bf16 (fp32 + bf16)", 6),
        Step("backward: output-layer matmul grads (bf16 grad)", 2),
    ),
    "slime": (
        Step("forward: output layer writes bf16 logits", 2),
        Step("forward: Float16Module fp32 copy (bf16 + fp32)", 6),
        Step("forward: in-place softmax scratch, saved (fp32 logits + fp32 softmax)", 8),
        Step("backward: grad formed in place in the saved softmax (fp32)", 4),
        Step("backward: grad cast to bf16 (fp32 + bf16)", 6),
    ),
    # slime with --rollout-temperature != 1: `logits / temperature` is a second fp32 copy while
    # the caller still holds the fp32 logits.
    "slime-temperature": (
        Step("forward: fp32 logits + their copy divided by the temperature", 8),
        Step("forward: + in-place softmax scratch, saved (3 fp32 copies)", 12),
        Step("backward: grad formed in place, then divided by the temperature (new fp32)", 8),
        Step("backward: grad cast to bf16 (fp32 + bf16)", 6),
    ),
}
PATHS = ("reference", "reference-chunked", "reference-recompute", "slime", "slime-chunked", "slime-temperature")


def vocab_per_rank(model: Model, tp: int) -> int:
    """Columns of the logits on one TP rank: the padded vocabulary divided by TP."""
    multiple = model.vocab_divisible_by * tp
    padded = -(-model.vocab // multiple) * multiple
    return padded // tp


def chunk_rows(tokens: int, chunk: int) -> int:
    """Largest chunk torch.chunk makes when T rows are cut into ceil(T / chunk) pieces (as slime does)."""
    if chunk <= 0 or chunk >= tokens:
        return tokens
    pieces = (tokens - 1) // chunk + 1
    return -(-tokens // pieces)


def logits_peak(path: str, tokens: int, vocab_rank: int, chunk: int = 0, hidden: int = 0) -> tuple[int, str]:
    """Peak bytes of the logits path above what existed before it, and the moment it happens.

    ``hidden`` matters only for the reference chunked variants, where the output-layer weight
    and hidden-state gradients of several chunks are alive at once.
    """
    n = tokens * vocab_rank
    if path in STEPS:
        step = max(STEPS[path], key=lambda s: s.bytes_per_element)
        return step.bytes_per_element * n, step.what
    if path not in PATHS:
        raise ToolkitError(f"unknown logits path {path!r}", "memplan", f"use one of {', '.join(PATHS)}")
    rows = chunk_rows(tokens, chunk)
    c, many = rows * vocab_rank, rows < tokens
    # Autograd sums the output-layer weight's gradient over the chunks in one buffer
    # (2 V/TP H bytes) that lives from the first chunk's backward to the last; the hidden-state
    # grads of finished chunks wait (2 rows H each) until the split's backward joins them.
    w_buf = 2 * vocab_rank * hidden if many else 0
    if path == "reference-chunked":  # chunks run last to first: each step frees one saved output
        return max(
            (4 * n + 8 * c, "backward of the first chunk: every chunk's saved log_softmax output + "
             "2 fp32 grads of one chunk"),
            (4 * n + 4 * c + w_buf + 2 * rows * hidden, "backward of the second chunk: the saved "
             "outputs left + 2 fp32 grads of one chunk + the weight-grad buffer"),
        )
    if path == "reference-recompute":
        return max(
            (12 * c + w_buf + 2 * (tokens - rows) * hidden, "backward of the last recomputed chunk: "
             "12 B/element of one chunk + the weight-grad buffer + the other chunks' hidden grads"),
            (2 * c + 2 * w_buf + 2 * tokens * hidden, "backward matmul of the last chunk: its bf16 grad "
             "+ two weight-grad buffers + all hidden grads"),
            (4 * tokens * hidden, "backward: hidden grads joined by the split's backward"),
        )
    return 8 * n, "forward (fp32 logits + saved softmax) = backward (chunk grads + their concatenation)"


# Terms besides the logits. The distributed optimizer is always on in slime
# (slime/backends/megatron_utils/arguments.py sets use_distributed_optimizer = True).
GRAD_BYTES = 4  # fp32 main_grad buffers (--accumulate-allreduce-grads-in-fp32, slime's recipes)
OPTIM_BYTES = 12  # fp32 master weights + Adam exp_avg + exp_avg_sq, sharded over DP
ACT_RECOMPUTE = 2  # bytes/token/hidden/layer kept with --recompute-granularity full: the bf16 layer input
ACT_FULL = 40  # bytes/token/hidden/layer without recompute (rough; see docs/oom_qwen35_4b.md)
RUNTIME_BYTES = 2 * GIB  # CUDA context, NCCL buffers, cuBLAS workspaces (outside torch's allocator)
ROUGH = {
    "weights": "parameter count ~4.2e9 from the checkpoint size",
    "grads": "assumes fp32 main grads; bf16 grads would halve it",
    "optimizer": "fp32 master + Adam m, v over P/(TP*DP)",
    "activations": "layer inputs with full recompute (40 B/token/hidden/layer without)",
    "runtime": "CUDA context, NCCL, workspaces; colocated SGLang's leftovers not counted",
}


@dataclass(frozen=True)
class Plan:
    """Per-GPU estimate for one (tokens, TP) point; bytes per term and their sum."""

    model: str
    tokens: int
    tp: int
    dp: int
    vocab_rank: int
    path: str
    peak_step: str
    terms: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.terms.values())

    def as_dict(self) -> dict:
        return {"model": self.model, "tokens": self.tokens, "tp": self.tp, "dp": self.dp,
                "vocab_per_rank": self.vocab_rank, "path": self.path, "peak_step": self.peak_step,
                "terms_bytes": dict(self.terms), "total_bytes": self.total,
                "total_gib": round(self.total / GIB, 2)}


def plan(tokens: int, tp: int, num_gpus: int, model: Model = QWEN35_4B, path: str = "slime",
         recompute: bool = True) -> Plan:
    """Estimate one GPU's peak for a micro-batch of ``tokens`` tokens at tensor-parallel ``tp``."""
    if tokens <= 0:
        raise ToolkitError(f"micro-batch tokens must be positive, got {tokens}", "MAX_TOKENS_PER_GPU",
                           "set MAX_TOKENS_PER_GPU to e.g. 16384")
    if tp <= 0 or num_gpus % tp:
        raise ToolkitError(f"NUM_GPUS={num_gpus} is not divisible by TP_SIZE={tp}", "TP_SIZE",
                           "choose a TP_SIZE that divides NUM_GPUS, e.g. 2 for 4 GPUs")
    if path not in ("slime", "reference"):
        raise ToolkitError(f"unknown logits path {path!r}", "--path", "use slime or reference")
    v = vocab_per_rank(model, tp)
    dp = num_gpus // tp
    logits, step = logits_peak(path, tokens, v)
    per_layer = ACT_RECOMPUTE if recompute else ACT_FULL
    terms = {
        "logits": logits,
        "weights": int(2 * model.params / tp),
        "grads": int(GRAD_BYTES * model.params / tp),
        "optimizer": int(OPTIM_BYTES * model.params / (tp * dp)),
        # Sequence parallel shards the saved activations by TP (not the logits).
        "activations": per_layer * model.hidden * model.layers * tokens // tp,
        "runtime": RUNTIME_BYTES,
    }
    return Plan(model.name, tokens, tp=tp, dp=dp, vocab_rank=v, path=path, peak_step=step, terms=terms)


def table(num_gpus: int, tokens: tuple[int, ...] = TABLE_TOKENS, tps: tuple[int, ...] = TABLE_TP,
          **kw) -> list[list[Plan | None]]:
    """Rows of tokens x columns of TP; None where TP does not divide NUM_GPUS or exceeds the model's max."""
    model = kw.get("model", QWEN35_4B)
    return [[plan(t, tp, num_gpus, **kw) if num_gpus % tp == 0 and tp <= model.max_tp else None
             for tp in tps] for t in tokens]


@dataclass(frozen=True)
class Verdict:
    """Whether the plan fits the budget and, if not, which knobs to turn and to what."""

    plan: Plan
    limit_bytes: int
    fits: bool
    max_tokens_fit: int | None
    tp_fit: int | None
    warning: str | None


def micro_batch_tokens(max_tokens_per_gpu: int, max_context_len: int) -> int:
    """slime packs up to MAX_TOKENS_PER_GPU per micro-batch, but an episode longer than that is
    placed alone (slime/utils/dp_schedule.py), so the largest micro-batch is the larger of both."""
    return max(max_tokens_per_gpu, max_context_len)


def verdict(max_tokens_per_gpu: int, max_context_len: int, tp: int, num_gpus: int, gpu_gib: float,
            fraction: float, model: Model = QWEN35_4B, **kw) -> Verdict:
    """Plan the configured point and, when it exceeds fraction x GPU memory, say what fits."""
    if not 0 < fraction <= 1:
        raise ToolkitError(f"MEMORY_WARN_FRACTION={fraction} is outside (0, 1]", "MEMORY_WARN_FRACTION",
                           "set it to e.g. 0.9")
    if gpu_gib <= 0:
        raise ToolkitError(f"GPU_MEMORY_GB={gpu_gib} must be positive", "GPU_MEMORY_GB",
                           "set it to the GPU's memory, e.g. 80 for an A800 80GB")
    tokens = micro_batch_tokens(max_tokens_per_gpu, max_context_len)
    p = plan(tokens, tp, num_gpus, model=model, **kw)
    limit = int(gpu_gib * fraction * GIB)
    if p.total <= limit:
        return Verdict(p, limit, fits=True, max_tokens_fit=None, tp_fit=None, warning=None)
    fit = next((t for t in range(tokens // TOKEN_STEP * TOKEN_STEP, 0, -TOKEN_STEP)
                if plan(t, tp, num_gpus, model=model, **kw).total <= limit), None)
    tp_fit = next((k for k in (2, 4, 8, 16) if tp < k <= model.max_tp and num_gpus % k == 0
                   and plan(tokens, k, num_gpus, model=model, **kw).total <= limit), None)
    head = (f"peak {p.total / GIB:.1f} GiB per GPU exceeds {limit / GIB:.1f} GiB "
            f"(MEMORY_WARN_FRACTION={fraction:g} x GPU_MEMORY_GB={gpu_gib:g})")
    fixes = []
    if fit is not None:
        over = [n for n, v in (("MAX_TOKENS_PER_GPU", max_tokens_per_gpu),
                               ("ROLLOUT_MAX_CONTEXT_LEN", max_context_len)) if v > fit]
        text = f"lower {' and '.join(over)} to <= {fit}"
        if "ROLLOUT_MAX_CONTEXT_LEN" in over:
            text += " (a longer episode is a micro-batch of its own)"
        fixes.append(text)
    if tp_fit is not None:
        fixes.append(f"raise TP_SIZE to {tp_fit}")
    if not fixes:
        state = sum(p.terms[k] for k in ("weights", "grads", "optimizer"))
        fixes.append(f"even {TOKEN_STEP} tokens per micro-batch do not fit at TP_SIZE={tp}: weights, grads "
                     f"and optimizer alone take {state / GIB:.1f} GiB; use more GPUs (NUM_GPUS) so TP and "
                     f"DP shard them, or offload the optimizer to the CPU")
    return Verdict(p, limit, fits=False, max_tokens_fit=fit, tp_fit=tp_fit, warning=f"WARN: {head}: {' or '.join(fixes)}")
