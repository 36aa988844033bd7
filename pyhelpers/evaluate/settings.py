"""EvalSettings: everything an evaluation needs to know, as values (read once, at the CLI edge).

`EvalSettings.from_config(cfg, ...)` maps the knobs; library code only ever sees the dataclass.
Sampling follows training: temperature 1.0, top_p 1.0 (slime's --rollout-temperature 1.0 in
pyhelpers/launch/slime_args.py), max_new_tokens = ROLLOUT_MAX_RESPONSE_LEN capped by what is left of
ROLLOUT_MAX_CONTEXT_LEN, special tokens kept as slime keeps them, so val and gate see the
distribution the policy is trained under.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyhelpers.config.load import Config
from pyhelpers.errors import ToolkitError
from pyhelpers.shopsim import protocol

# What slime's GenerateState sends besides max_new_tokens (its defaults for our launch flags).
SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "skip_special_tokens": False,
            "no_stop_trim": True, "spaces_between_special_tokens": False}


@dataclass(frozen=True)
class EvalSettings:
    shopsim_url: str                      # http://SHOPSIM_HOST:SHOPSIM_PORT
    server_url: str                       # SGLang eval server, http://127.0.0.1:EVAL_PORT
    tokenizer_dir: str                    # HF dir of the policy (TRAIN_SAVE/RUN_NAME/hf or --model-dir)
    # The knobs' values, no defaults here: env/defaults.env holds them (from_config; tests give theirs).
    concurrency: int                      # EVAL_CONCURRENCY
    slots: int                            # SHOPSIM_SLOTS: never more episodes in flight than this
    max_turns: int                        # MAX_TURNS
    max_context_len: int                  # ROLLOUT_MAX_CONTEXT_LEN
    max_response_len: int                 # ROLLOUT_MAX_RESPONSE_LEN
    skill_token_budget: int               # SKILL_TOKEN_BUDGET
    episode_retries: int                  # EVAL_EPISODE_RETRIES (infra errors only)
    max_infra_share: float                # EVAL_MAX_INFRA_SHARE: above it no summary is written
    reset_timeout_s: float                # > SHOPSIM_RESET_RETRIES x SHOPSIM_RESET_DELAY
    shopsim_ready_s: float                # SHOPSIM_START_TIMEOUT: wait for a restarted simulator
    server_ready_s: float = 120.0         # wait for the SGLang server's /health before a retry
    # The head's gate's token when shopsim_url is the gate (the one-job mode's hook on a multi-node
    # run: rollout/in_job_eval.py); "" on loopback. Never printed: not in the repr, nor in public().
    shopsim_token: str = field(default="", repr=False)
    # Not knobs (defaults fit the real stack; tests and the benchmark shorten them):
    request_timeout_s: float = 60.0       # one interact / release
    generate_timeout_s: float = 1800.0    # one /generate (4096 tokens under full load)
    episode_timeout_s: float = 7200.0     # one attempt of one episode
    retry_delay_s: float = 1.0            # first back-off before an infra retry (doubles, capped)
    retry_delay_max_s: float = 30.0
    sampling: dict = field(default_factory=lambda: dict(SAMPLING))

    @property
    def in_flight(self) -> int:
        """Episodes played at once: EVAL_CONCURRENCY, never more than the slot allowance."""
        return max(1, min(self.concurrency, self.slots))

    def check(self) -> EvalSettings:
        bad = []
        if self.concurrency < 1 or self.slots < 1:
            bad.append("EVAL_CONCURRENCY and SHOPSIM_SLOTS must be >= 1")
        if self.max_turns < 1 or self.max_response_len < 1 or self.max_response_len >= self.max_context_len:
            bad.append("MAX_TURNS >= 1 and 1 <= ROLLOUT_MAX_RESPONSE_LEN < ROLLOUT_MAX_CONTEXT_LEN")
        if self.episode_retries < 0:
            bad.append("EVAL_EPISODE_RETRIES must be >= 0")
        if not 0.0 <= self.max_infra_share <= 1.0:
            bad.append("EVAL_MAX_INFRA_SHARE must be in [0, 1]")
        if bad:
            raise ToolkitError("invalid evaluation knobs", "; ".join(bad), "fix them in .env")
        return self

    @classmethod
    def from_config(cls, cfg: Config, *, shopsim_url: str | None = None, server_url: str | None = None,
                    tokenizer_dir: str | None = None) -> EvalSettings:
        """The knob values of `cfg` (a pyhelpers.config.load.Config), with the CLI's overrides."""
        return cls(
            shopsim_url=shopsim_url or f"http://{cfg.SHOPSIM_HOST}:{cfg.SHOPSIM_PORT}",
            server_url=server_url or f"http://127.0.0.1:{cfg.EVAL_PORT}",
            tokenizer_dir=str(tokenizer_dir or (cfg.save_dir / "hf")),
            concurrency=cfg.EVAL_CONCURRENCY, slots=cfg.SHOPSIM_SLOTS,
            max_turns=cfg.MAX_TURNS, max_context_len=cfg.ROLLOUT_MAX_CONTEXT_LEN,
            max_response_len=cfg.ROLLOUT_MAX_RESPONSE_LEN,
            skill_token_budget=cfg.SKILL_TOKEN_BUDGET, episode_retries=cfg.EVAL_EPISODE_RETRIES,
            max_infra_share=cfg.EVAL_MAX_INFRA_SHARE, reset_timeout_s=protocol.reset_timeout_s(cfg.SHOPSIM_RESET_RETRIES,
                                                    cfg.SHOPSIM_RESET_DELAY),
            shopsim_ready_s=cfg.SHOPSIM_START_TIMEOUT,
        ).check()

    @classmethod
    def from_plugin(cls, s, *, server_url: str, shopsim_token: str = "") -> EvalSettings:
        """The same knobs as the rollout plugin's settings carry them (rollout/settings.py
        PluginSettings, read from slime.yaml inside slime's RolloutManager): the one-job mode's eval
        hook plays val on the job's own engines behind `server_url`, slime's router."""
        return cls(
            shopsim_url=s.shopsim_url, server_url=server_url, tokenizer_dir=s.tokenizer_path,
            concurrency=s.eval_concurrency, slots=s.shopsim_slots, max_turns=s.max_turns,
            max_context_len=s.rollout_max_context_len, max_response_len=s.rollout_max_response_len,
            skill_token_budget=s.skill_token_budget, episode_retries=s.eval_episode_retries,
            max_infra_share=s.eval_max_infra_share, reset_timeout_s=s.shopsim_reset_timeout_s,
            shopsim_ready_s=s.shopsim_start_timeout, shopsim_token=shopsim_token,
        ).check()

    def public(self) -> dict:
        """What summaries record about how the episodes were played (no URLs, no paths)."""
        return {"max_turns": self.max_turns, "max_context_len": self.max_context_len,
                "max_response_len": self.max_response_len, "skill_token_budget": self.skill_token_budget,
                "episode_retries": self.episode_retries, "sampling": dict(sorted(self.sampling.items()))}
