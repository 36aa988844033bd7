"""The baseline stage (BASELINE_VAL=1): the base model's bare val, once, before round 0 -- the
reference every round's val is compared with. The eval server's session the evaluate stage runs
(stages/eval_session.py), without the gate, on HF_MODEL instead of the round's export."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyhelpers.config.load import Config
from pyhelpers.launch import services
from pyhelpers.run.layout import RunLayout
from pyhelpers.stages import eval_session

if TYPE_CHECKING:
    from pyhelpers.stages.context import StageContext

LOG = eval_session.SERVER_LOG
COLOUR = "#8d6e63"
SUMMARY = "bare val of the base model"


def launches(cfg: Config, lay: RunLayout, r: int, model_args: list[str]) -> list[tuple[str, str, str]]:
    return [services.plan_line(cfg, lay, "shopsim"),
            services.plan_line(cfg, lay, "eval-server", "baseline: the base model's bare val",
                               model=eval_session.model_dir(cfg, lay, baseline=True))]


def done(lay: RunLayout, r: int, rounds: int) -> tuple[bool, str]:
    """Round-independent: the baseline's val summary exists."""
    return lay.baseline_val_summary.is_file(), "bare val of the base model (BASELINE_VAL=1)"


def run(loop: StageContext, r: int) -> None:
    eval_session.play(loop, None, baseline=True)
    eval_session.wandb_in_background(loop.cfg, loop.lay)
