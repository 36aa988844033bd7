"""The rollout plugin's per-round configuration: the YAML keys, defined once.

The driver writes `rounds/round-NNN/slime.yaml` with `write_plugin_yaml` (values usually from
`plugin_values(cfg, layout, round)`) and hands it to slime with `--custom-config-path`. slime
`setattr`s every top-level key on its `args` (overriding a slime argument of the same name), so
each key carries the prefix `shopsimrl_` and can never shadow one of slime's own arguments.
Inside the actor, `from_args(args)` reads them back and checks them. No environment variables.

Stdlib + PyYAML only (both are in slime's environment).
"""

from __future__ import annotations

import weakref
from dataclasses import MISSING, asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from pyhelpers.config.knobs import PluginKnobs
from pyhelpers.errors import ToolkitError
from pyhelpers.jsonfiles import write_bytes_atomic
from pyhelpers.run.layout import RoundFiles, shopsim_gate_token
from pyhelpers.shopsim import protocol

PREFIX = "shopsimrl_"
REWARDS = ("strict", "loose", "success")
WHERE = "the round's slime.yaml (--custom-config-path)"


@dataclass(frozen=True)
class PluginSettings(PluginKnobs):
    """One round's plugin configuration. YAML key = PREFIX + field name. The knobs the plugin reads
    as themselves are PluginKnobs' fields, generated from their declarations (`plugin`)."""

    round: int                         # 0-based round number (spool ids, metrics)
    round_dir: str                     # rounds/round-NNN: spool/ and rollout_metrics.jsonl go here
    bank_path: str                     # the bank injected into this round; "" = an empty bank
    tasks_path: str                    # TRAIN_TASKS: task_id (slime's label) -> shopsim_idx
    shopsim_url: str                   # http://SHOPSIM_HOST:SHOPSIM_PORT
    tokenizer_path: str = ""           # HF model dir of the policy; "" = slime's --hf-checkpoint
    policy_model: str = ""             # recorded in spool records (policy.model)
    # NNODES > 1: shopsim_url is the head's gate, which wants the token in this file (a path, never the
    # token: shopsim/gate.py); "" = the simulator on this node's loopback, no token (NNODES=1).
    shopsim_token_path: str = ""
    # VAL_TASKS, for the one-job mode's eval hook (rollout/in_job_eval.py); "" = none given
    val_tasks_path: str = ""
    # Not knobs (defaults fit the real stack; tests shorten them):
    shopsim_timeout_s: float = 60.0    # one interact/release request
    shopsim_reset_timeout_s: float = 90.0  # one reset (> pack_api's own 5 x 5 s wait for a slot)
    generate_timeout_s: float = 1800.0     # one /generate call (4096 tokens under full load)
    episode_timeout_s: float = 7200.0      # one whole episode, slot wait excluded
    retry_drain_timeout_s: float = 600.0   # at step end: longest wait for retries still playing

    def check(self) -> PluginSettings:
        """Rules a type cannot say; the message names the YAML key and the knob behind it."""
        def bad(key: str, what: str, fix: str):
            raise ToolkitError(what, f"{WHERE} key {PREFIX}{key}", fix)

        if self.reward not in REWARDS:
            bad("reward", f"REWARD must be one of {', '.join(REWARDS)}, got {self.reward!r}", "fix REWARD")
        if self.retry_trains not in (0, 1):
            bad("retry_trains", f"RETRY_TRAINS must be 0 or 1, got {self.retry_trains!r}", "fix RETRY_TRAINS")
        if self.retry_trains == 1:
            bad("retry_trains", "RETRY_TRAINS=1 (retries as training samples) is not supported yet",
                "set RETRY_TRAINS=0; retries still reach the analyst through spool/ (docs/training.md)")
        if not 1 <= self.shopsim_episode_concurrency <= self.shopsim_slots:
            bad("shopsim_episode_concurrency",
                f"SHOPSIM_EPISODE_CONCURRENCY={self.shopsim_episode_concurrency} must be in 1..SHOPSIM_SLOTS"
                f" ({self.shopsim_slots})", "lower SHOPSIM_EPISODE_CONCURRENCY or raise SHOPSIM_SLOTS")
        for key in ("max_turns", "rollout_max_context_len", "rollout_max_response_len"):
            if getattr(self, key) < 1:
                bad(key, f"{key.upper()} must be at least 1, got {getattr(self, key)}", f"fix {key.upper()}")
        if self.rollout_max_response_len >= self.rollout_max_context_len:
            bad("rollout_max_response_len", "ROLLOUT_MAX_RESPONSE_LEN must be below ROLLOUT_MAX_CONTEXT_LEN",
                "raise ROLLOUT_MAX_CONTEXT_LEN or lower ROLLOUT_MAX_RESPONSE_LEN")
        if self.draw_limit_factor < 1:
            bad("draw_limit_factor", f"DRAW_LIMIT_FACTOR must be at least 1, got {self.draw_limit_factor}",
                "fix DRAW_LIMIT_FACTOR")
        if self.skill_token_budget < 0:
            bad("skill_token_budget", "SKILL_TOKEN_BUDGET must be >= 0", "fix SKILL_TOKEN_BUDGET")
        if not self.round_dir or not self.tasks_path or not self.shopsim_url:
            bad("round_dir", "round_dir, tasks_path and shopsim_url must be set", "rewrite the round's slime.yaml")
        return self

    def for_rollout(self, rollout_id: int) -> PluginSettings:
        """The settings of the round `rollout_id` trains in. A job of today's order trains one round,
        the YAML's (rollouts [round x STEPS_PER_ROUND, (round + 1) x STEPS_PER_ROUND): these settings
        unchanged); the one-job mode's job spans rounds, round r = rollout_id // STEPS_PER_ROUND with
        its own directory and bank beside the YAML's round's (docs/one-job-mode.md)."""
        r = int(rollout_id) // self.steps_per_round
        if r == self.round:
            return self
        if r < self.round:
            raise ToolkitError(f"rollout {rollout_id} is before round {self.round}, the job's first "
                               f"(STEPS_PER_ROUND={self.steps_per_round})", f"{WHERE} key {PREFIX}round",
                               "start the job at its round's first rollout (--start-rollout-id; `make plan` shows it)")
        files = RoundFiles(Path(self.round_dir)).of_round(r)
        return replace(self, round=r, round_dir=str(files.dir), bank_path=str(files.bank))

    @property
    def spare_slots(self) -> int:
        """Slots the full-skill retries may use: SHOPSIM_SLOTS - SHOPSIM_EPISODE_CONCURRENCY."""
        return self.shopsim_slots - self.shopsim_episode_concurrency

    @property
    def spool_dir(self) -> Path:
        return RoundFiles(Path(self.round_dir)).spool

    @property
    def metrics_path(self) -> Path:
        return RoundFiles(Path(self.round_dir)).rollout_metrics


_TYPES = {f.name: f.type for f in fields(PluginSettings)}
REQUIRED = tuple(f.name for f in fields(PluginSettings) if f.default is MISSING)


def yaml_keys() -> list[str]:
    """Every key the YAML may hold (documentation and tests)."""
    return [PREFIX + name for name in _TYPES]


def _coerce(name: str, value: Any) -> Any:
    kind = _TYPES[name]
    try:
        if kind == "int":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if kind == "float":
            return float(value)
        if kind == "bool":
            if value not in (0, 1):  # True, False, 0 and 1 (a YAML bool or a flag's number)
                raise ValueError
            return bool(value)
        return "" if value is None else str(value)
    except (TypeError, ValueError):
        raise ToolkitError(f"{PREFIX}{name} must be {kind}, got {value!r}", WHERE,
                           "rewrite the round's slime.yaml with pyhelpers (write_plugin_yaml)") from None


def from_mapping(values: dict[str, Any]) -> PluginSettings:
    """Settings from {field: value} (no prefix), type-coerced and checked."""
    unknown = sorted(set(values) - set(_TYPES))
    if unknown:
        raise ToolkitError(f"unknown plugin setting(s) {', '.join(unknown)}", WHERE,
                           f"known: {', '.join(_TYPES)}")
    missing = [n for n in REQUIRED if n not in values]
    if missing:
        raise ToolkitError(f"missing plugin setting(s) {', '.join(PREFIX + n for n in missing)}", WHERE,
                           "the driver writes them with write_plugin_yaml; rerun `make train`/`make resume`")
    return PluginSettings(**{k: _coerce(k, v) for k, v in values.items()}).check()


# id(args) -> (a weak reference to that args object, its settings). The reference is checked on
# every hit: ids are reused once an object is gone, and a new args must never get another's settings.
_CACHE: dict[int, tuple[Any, PluginSettings]] = {}


def from_args(args: Any) -> PluginSettings:
    """The settings slime put on `args` from the YAML (cached per args object), cross-checked
    against slime's own --rollout-max-response-len / --rollout-max-context-len when set."""
    cached = _CACHE.get(id(args))
    if cached is not None and cached[0]() is args:
        return cached[1]
    values = {name: getattr(args, PREFIX + name) for name in _TYPES if hasattr(args, PREFIX + name)}
    s = from_mapping(values)
    for name in ("rollout_max_response_len", "rollout_max_context_len"):
        theirs = getattr(args, name, None)
        if theirs is not None and int(theirs) != getattr(s, name):
            raise ToolkitError(f"slime --{name.replace('_', '-')}={theirs} differs from the plugin's "
                               f"{PREFIX}{name}={getattr(s, name)}", WHERE,
                               "build both from the same configuration (`make plan` shows the slime command line)")

    _CACHE[id(args)] = (weakref.ref(args), s)
    return s


def write_plugin_yaml(path: Path, **values: Any) -> PluginSettings:
    """Check `values` (PluginSettings fields) and write them, prefixed, to `path` atomically."""
    import yaml  # optional: PyYAML, only when the driver writes the file

    s = from_mapping(values)
    doc = {PREFIX + k: v for k, v in asdict(s).items()}
    header = "# The rollout plugin's settings for this round (pyhelpers/rollout/settings.py).\n"
    write_bytes_atomic(Path(path), (header + yaml.safe_dump(doc, sort_keys=True)).encode("utf-8"))
    return s


def _through_the_gate(cfg: Any, layout: Any) -> dict[str, str]:
    """NNODES > 1: slime's RolloutManager, where the plugin runs, may be on any node; it reaches the
    head's simulator through the gate on the head's NODE_ADDR with the run's token (shopsim/gate.py)."""
    return {"shopsim_url": f"http://{cfg.NODE_ADDR}:{cfg.SHOPSIM_PORT}",
            "shopsim_token_path": str(shopsim_gate_token(layout.run_dir))}


def _yaml_value(value: Any) -> Any:
    """A knob's typed value as slime's YAML holds it (a path as its text)."""
    return str(value) if isinstance(value, Path) else value


def plugin_values(cfg: Any, layout: Any, r: int) -> dict[str, Any]:
    """The YAML values of round r from the run's configuration (pyhelpers.config.load.Config) and
    layout (pyhelpers.run.layout.RunLayout). The bank is the one injected into round r."""
    bank = layout.bank_in(r)
    if r > 0 and not bank.exists():
        raise ToolkitError(f"round {r} has no injected bank", str(bank),
                           f"finish round {r - 1}'s inject stage first (make resume)")
    return {
        "round": r,
        "round_dir": str(layout.round_dir(r)),
        "bank_path": str(bank) if bank.exists() else "",
        "tasks_path": str(cfg.TRAIN_TASKS),
        "val_tasks_path": str(cfg.VAL_TASKS),
        "shopsim_url": f"http://{cfg.SHOPSIM_HOST}:{cfg.SHOPSIM_PORT}",
        **(_through_the_gate(cfg, layout) if cfg.multinode else {}),
        **{f.name: _yaml_value(getattr(cfg, f.name.upper())) for f in fields(PluginKnobs)},
        # At least the old fixed 90 s; longer when the simulator may wait longer for a slot.
        "shopsim_reset_timeout_s": max(90.0, protocol.reset_timeout_s(cfg.SHOPSIM_RESET_RETRIES,
                                                                      cfg.SHOPSIM_RESET_DELAY)),
        "tokenizer_path": str(cfg.HF_MODEL),
        "policy_model": cfg.HF_MODEL.name,
    }
