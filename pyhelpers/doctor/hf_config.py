"""HF_MODEL's config.json against the model flags (MODEL_ARGS), compared as slime compares them
when its job starts, so that `make doctor` names a mismatch before ShopSimulator, Ray and the job
have started and slime's AssertionError ends it.

What slime 624b824 does (slime/backends/megatron_utils/arguments.py: megatron_parse_args, lines
193-200, calls _hf_validate_args, lines 97-148), in our words:
- it loads config.json with transformers' AutoConfig; a config that has a text_config (a
  multimodal-style config such as Qwen3.5's) is compared through text_config alone, the top level
  not at all (lines 103-105);
- it compares a config field only when the loaded config has it and Megatron's parsed arguments
  have the paired one (line 132). The loaded config has every field of its transformers class: a
  field config.json leaves out takes the class default. So Qwen3.5's text config says
  tie_word_embeddings false unless text_config itself says true, whatever the top level says;
- the pairs (lines 118-128) are below (PAIRS); tie_word_embeddings must be the opposite of
  --untie-embeddings-and-output-weights; intermediate_size is skipped for an MoE config whose
  --moe-layer-freq has no dense layer (lines 116, 129-130, with _has_dense_moe_layers, 47-61);
- rope_theta, taken from rope_parameters when given there, must equal --rotary-base (107-145).
Megatron-LM 1dcf0daf's parser stores --norm-epsilon as layernorm_epsilon (its TransformerConfig
field; there is no norm_epsilon argument, so slime's norm_epsilon pair never applies), and a flag not
given keeps its default (FLAGS).
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The Megatron arguments slime compares: dest -> (flag, type, Megatron-LM 1dcf0daf's default).
# The sizes default to None (megatron/core/transformer/transformer_config.py: num_layers:47,
# hidden_size:106, num_attention_heads:109, ffn_hidden_size:131, moe_shared_expert_intermediate_size:539,
# moe_ffn_hidden_size:566); --norm-epsilon 1e-5 (:152), --rotary-base 10000 and
# --untie-embeddings-and-output-weights (megatron/training/arguments.py:1678, :1720),
# --moe-layer-freq 1 (:2726).
FLAGS: dict[str, tuple[str, type, Any]] = {
    "hidden_size": ("--hidden-size", int, None),
    "num_attention_heads": ("--num-attention-heads", int, None),
    "num_layers": ("--num-layers", int, None),
    "ffn_hidden_size": ("--ffn-hidden-size", int, None),
    "moe_ffn_hidden_size": ("--moe-ffn-hidden-size", int, None),
    "moe_shared_expert_intermediate_size": ("--moe-shared-expert-intermediate-size", int, None),
    "untie_embeddings_and_output_weights": ("--untie-embeddings-and-output-weights", bool, False),
    "layernorm_epsilon": ("--norm-epsilon", float, 1e-5),
    "rotary_base": ("--rotary-base", int, 10000),
    "moe_layer_freq": ("--moe-layer-freq", str, 1),
}
# (config field, Megatron argument), in slime's order; tie_word_embeddings is compared as opposites.
PAIRS = (("hidden_size", "hidden_size"), ("num_attention_heads", "num_attention_heads"),
         ("num_hidden_layers", "num_layers"), ("intermediate_size", "ffn_hidden_size"),
         ("moe_intermediate_size", "moe_ffn_hidden_size"),
         ("shared_expert_intermediate_size", "moe_shared_expert_intermediate_size"),
         ("tie_word_embeddings", "untie_embeddings_and_output_weights"), ("rms_norm_eps", "layernorm_epsilon"),
         ("rope_theta", "rotary_base"))
MOE_FIELDS = ("moe_intermediate_size", "num_experts", "n_routed_experts", "num_local_experts")
MOE_ONLY = ("moe_intermediate_size", "shared_expert_intermediate_size")

# The defaults of the transformers config class for the fields slime compares, for the model types
# the toolkit trains: transformers 5.23.0 (env/requirements.txt),
# models/qwen3_5/configuration_qwen3_5.py:82-94 (Qwen3_5TextConfig); a rope_theta given nowhere
# becomes the class's default_theta, 10000 (modeling_rope_utils.py:785). The class has none of
# MOE_FIELDS. Other model types: a field config.json leaves out is reported as not checked.
CLASS_DEFAULTS: dict[str, dict[str, Any]] = {
    "qwen3_5_text": {"hidden_size": 4096, "num_attention_heads": 16, "num_hidden_layers": 32,
                     "intermediate_size": 12288, "tie_word_embeddings": False, "rms_norm_eps": 1e-6,
                     "rope_theta": 10000.0},
}
# A composite config's text class: transformers builds text_config (from defaults when config.json
# has none), so slime always compares through it (configuration_qwen3_5.py:172-178).
TEXT_CLASS = {"qwen3_5": "qwen3_5_text"}


@dataclass(frozen=True)
class Mismatch:
    """One field slime would refuse: both values, where the config's came from, and the fix."""

    field: str  # as config.json names it, with its text_config. prefix when read there
    hf: Any
    hf_from: str  # "" when config.json says it; else why it has this value
    flag: str
    megatron: Any
    flag_given: bool
    fix: str

    def text(self) -> str:
        hf = f"{self.field} = {json.dumps(self.hf)}" + (f" ({self.hf_from})" if self.hf_from else "")
        if isinstance(self.megatron, bool):  # --untie-...: slime needs the opposite of tie_word_embeddings
            return f"{hf} but {self.flag} {'given' if self.megatron else 'not given'} (slime needs them opposite)"
        return f"{hf} but {self.flag} {self.megatron}" + ("" if self.flag_given else " (Megatron's default)")


@dataclass(frozen=True)
class Verdict:
    compared: tuple[str, ...]  # the config fields slime would compare
    unchecked: tuple[str, ...]  # fields config.json leaves to the defaults of a class not known here
    mismatches: tuple[Mismatch, ...]


class FlagError(ValueError):
    """A model flag Megatron's parser would refuse (e.g. --rotary-base 1e7: an int)."""


def megatron_values(argv: list[str]) -> tuple[dict[str, Any], set[str]]:
    """({dest: value} of FLAGS as Megatron's parser leaves them, the dests given on argv). The last
    occurrence of a flag wins, as in argparse; `--flag=value` and `--flag value` both count."""
    by_flag = {flag: dest for dest, (flag, _, _) in FLAGS.items()}
    values = {dest: default for dest, (_, _, default) in FLAGS.items()}
    given: set[str] = set()
    i = 0
    while i < len(argv):
        flag, eq, inline = argv[i].partition("=")
        dest = by_flag.get(flag)
        i += 1
        if dest is None:
            continue
        kind = FLAGS[dest][1]
        if kind is bool:
            values[dest] = True
        else:
            raw = inline if eq else (argv[i] if i < len(argv) else None)
            i += 0 if eq else 1
            if raw is None:
                raise FlagError(f"{flag} has no value")
            try:
                values[dest] = kind(raw)
            except ValueError:
                raise FlagError(f"{flag} {raw}: Megatron parses it as {kind.__name__}") from None
        given.add(dest)
    return values, given


def _freq_has_dense_layer(freq: Any) -> bool:
    """slime's _has_dense_moe_layers on what Megatron's moe_freq_type makes of --moe-layer-freq:
    a whole number N counts as dense only when N is 0; a pattern like "([0]+[1]*3)*8" when one of
    its entries is 0."""
    if isinstance(freq, int):
        return freq == 0
    text = str(freq)
    try:
        return 0 in _pattern(ast.parse(text, mode="eval").body) if "[" in text else int(text) == 0
    except (SyntaxError, ValueError, TypeError):
        raise FlagError(f"--moe-layer-freq {text}: neither a whole number nor a layer pattern") from None


def _pattern(node: ast.AST) -> list[int]:
    """A layer pattern of list literals, + and * (Megatron evaluates it with eval; we never do)."""
    if isinstance(node, ast.List):
        return [int(ast.literal_eval(e)) for e in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _pattern(node.left) + _pattern(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        left, right = node.left, node.right
        if isinstance(left, ast.Constant):
            left, right = right, left
        return _pattern(left) * int(ast.literal_eval(right))
    raise FlagError(f"--moe-layer-freq: cannot read the layer pattern {ast.unparse(node)!r}")


def slime_view(cfg: dict) -> tuple[dict, str, str]:
    """(the fields slime compares, their prefix in messages, the transformers class they belong to)."""
    model_type = str(cfg.get("model_type") or "")
    text = cfg.get("text_config")
    if isinstance(text, dict) or model_type in TEXT_CLASS:
        text = text if isinstance(text, dict) else {}
        return text, "text_config.", TEXT_CLASS.get(model_type) or str(text.get("model_type") or "")
    return cfg, "", model_type


def _config_value(fields: dict, name: str) -> tuple[bool, Any]:
    """(present, value) of a field in config.json; rope_theta from rope_parameters first (slime: 110-114)."""
    if name == "rope_theta":
        rope = fields.get("rope_parameters")
        if isinstance(rope, dict) and "rope_theta" in rope:
            return True, rope["rope_theta"]
    return name in fields, fields.get(name)


def compare(cfg: dict, argv: list[str]) -> Verdict:
    """What slime's check would say about config.json (parsed) against the model flags."""
    meg, given = megatron_values(argv)
    fields, prefix, cls = slime_view(cfg)
    defaults = CLASS_DEFAULTS.get(cls)
    has = {name: _config_value(fields, name) for name, _ in PAIRS}
    for name in MOE_FIELDS:
        has.setdefault(name, (name in fields, fields.get(name)))
    is_moe = any(has[n][0] or (defaults is not None and n in defaults) for n in MOE_FIELDS)
    compared, unchecked, mismatches = [], [], []
    for name, dest in PAIRS:
        if name == "intermediate_size" and is_moe and not _freq_has_dense_layer(meg["moe_layer_freq"]):
            continue
        present, value = has[name]
        hf_from = ""
        if not present:
            if defaults is None:  # an unknown class: its default is not known here
                if is_moe or name not in MOE_ONLY:  # (a dense config's class has no MoE sizes)
                    unchecked.append(prefix + name)
                continue
            if name not in defaults:
                continue  # the class has no such field: slime does not compare it
            value = defaults[name]
            hf_from = f"left out: transformers' {cls} default"
        if name == "rope_theta" and value is None:
            continue  # slime compares rope_theta only when the config has one (line 140)
        compared.append(prefix + name)
        tie = dest == "untie_embeddings_and_output_weights"
        if (value == meg[dest]) != tie:
            continue
        wanted = (not meg[dest]) if tie else meg[dest]
        mismatches.append(Mismatch(prefix + name, value, hf_from, FLAGS[dest][0], meg[dest], dest in given,
                                   _fix(cfg, prefix, name, wanted, hf_from)))
    return Verdict(tuple(compared), tuple(unchecked), tuple(mismatches))


def _fix(cfg: dict, prefix: str, name: str, wanted: Any, hf_from: str) -> str:
    if hf_from:  # left out: writing the value the flags need is the whole fix
        top = (f" (the top level says {json.dumps(cfg[name])}; slime reads only text_config)"
               if prefix and name in cfg and name != "rope_theta" else "")
        where = prefix.rstrip(".") or "config.json"
        if name == "rope_theta":
            return f'set "rope_theta": {json.dumps(wanted)} in the rope_parameters of {where}'
        return f'add "{name}": {json.dumps(wanted)} to {where}{top}'
    return ("HF_MODEL and MODEL_ARGS_SCRIPT describe different models: point HF_MODEL at the weights of the model "
            "MODEL_ARGS_SCRIPT is for, or MODEL_ARGS_SCRIPT at this model's script (slime's scripts/models/)")


def read_config(path: Path) -> dict:
    """config.json as a dict; ValueError naming what is wrong."""
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read it: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(cfg, dict):
        raise ValueError("not a JSON object")
    if not cfg.get("model_type"):
        raise ValueError("no model_type: transformers' AutoConfig cannot tell which model it describes")
    return cfg
