"""slime.utils.types.Sample without torch: the same fields, Status values and helpers' rules."""

from dataclasses import dataclass, field
from enum import Enum


@dataclass
class Sample:
    group_index: int | None = None
    index: int | None = None
    rollout_id: int | None = None  # one rollout *execution* (fan-out siblings share it), not the step
    prompt: str | list = ""
    tokens: list = field(default_factory=list)
    multimodal_inputs: dict | None = None
    multimodal_train_inputs: dict | None = None
    multimodal_train_input_id: str | None = None
    apply_chat_template_kwargs: dict = field(default_factory=dict)
    response: str = ""
    response_length: int = 0
    label: str | None = None
    reward: float | dict | None = None
    loss_mask: list | None = None
    weight_versions: list = field(default_factory=list)
    rollout_log_probs: list | None = None
    rollout_top_p_token_ids: list | None = None
    rollout_top_p_token_offsets: list | None = None
    rollout_routed_experts: list | None = None
    remove_sample: bool = False
    teacher_log_probs: list | None = None

    class Status(Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"
        FAILED = "failed"

    status: Status = Status.PENDING
    metadata: dict = field(default_factory=dict)
    generate_function_path: str | None = None
    custom_rm_path: str | None = None
    train_metadata: dict | None = None
    session_id: str | None = None
    non_generation_time: float = 0.0

    def get_reward_value(self, args) -> float:
        return self.reward if not getattr(args, "reward_key", None) else self.reward[args.reward_key]

    @property
    def effective_response_length(self):
        return sum(self.loss_mask) if self.loss_mask is not None else self.response_length

    def append_response_tokens(self, args=None, *, tokens=None, log_probs=None, trainable=True,
                               meta_info: dict | None = None, text: str | None = None,
                               update_terminal_info: bool = True):
        """slime's rules: trainable tokens need log probs; others get mask 0 and log prob 0.0;
        finish_reason length/abort/stop sets TRUNCATED/ABORTED/COMPLETED."""
        tokens = [int(t) for t in (tokens or [])]
        log_probs = None if log_probs is None else [float(x) for x in log_probs]
        if log_probs is not None and len(log_probs) != len(tokens):
            raise ValueError(f"log_probs length {len(log_probs)} != tokens length {len(tokens)}")
        if tokens and trainable and log_probs is None:
            raise ValueError("trainable response tokens require rollout log probabilities.")
        if tokens and not trainable:
            if log_probs is not None:
                raise ValueError("non-trainable response tokens should not pass rollout log probabilities.")
            log_probs = [0.0] * len(tokens)
        if text is not None:
            self.response += text
        before = self.response_length
        if tokens:
            self.tokens += tokens
            self.response_length += len(tokens)
            if self.loss_mask is None:
                self.loss_mask = [1] * before
            self.loss_mask += [1 if trainable else 0] * len(tokens)
        if log_probs is not None:
            if self.rollout_log_probs is None:
                self.rollout_log_probs = [0.0] * before
            self.rollout_log_probs += log_probs
        if meta_info and update_terminal_info and "finish_reason" in meta_info:
            if "weight_version" in meta_info:
                self.weight_versions.append(meta_info["weight_version"])
            kind = meta_info["finish_reason"]["type"]
            self.status = {"length": Sample.Status.TRUNCATED, "abort": Sample.Status.ABORTED,
                           "stop": Sample.Status.COMPLETED}.get(kind, self.status)
        if self.loss_mask is not None and len(self.loss_mask) != self.response_length:
            raise ValueError("loss_mask length != response_length")
        if self.rollout_log_probs is not None and len(self.rollout_log_probs) != self.response_length:
            raise ValueError("rollout_log_probs length != response_length")
