"""The evaluate stage of a round: the eval server's session on the round's `hf` export -- bare val,
then, once compile (which may run beside this stage: VAL_BESIDE_COMPILE) wrote compiled.json, the
random-masked gate (stages/eval_session.py) -- and the stage record. In the one-job mode
(ONE_JOB=1) the job's eval hook plays both on the job's engines; this stage waits for their
summaries (stages/one_job.py) and plays on the eval server only what the job left unplayed."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pyhelpers.config.load import Config
from pyhelpers.launch import services
from pyhelpers.run import gpu_time
from pyhelpers.run.layout import RunLayout
from pyhelpers.run.records import write_record
from pyhelpers.stages import eval_session, inputs, one_job

if TYPE_CHECKING:
    from pyhelpers.stages.context import StageContext

LOG = eval_session.SERVER_LOG
COLOUR = "#2e7d32"
GPU_PHASE = gpu_time.SERVER  # run/gpu_time.py: its events mark server-start, episodes, server-stop


def reads(lay: RunLayout, r: int, seed_bank: Path | None) -> list[inputs.RunInput]:
    return [inputs.compiled(lay, r)]


def launches(cfg: Config, lay: RunLayout, r: int, model_args: list[str]) -> list[tuple[str, str, str]]:
    if cfg.ONE_JOB:  # the job's eval hook plays; the eval server only for what a job gone early left
        return [services.plan_line(cfg, lay, "eval-server", "only for a round whose job ended before its eval "
                                   "hook's summaries (ONE_JOB=1)", model=eval_session.model_dir(cfg, lay)),
                ("evaluate", "", "no command line: the slime job's eval hook plays bare val, then the gate, "
                 "on the job's engines; the loop waits for their summaries")]
    return [services.plan_line(cfg, lay, "eval-server", model=eval_session.model_dir(cfg, lay)),
            ("evaluate", "", "no command line: bare val, then the gate, in the loop's own process")]


def done(lay: RunLayout, r: int, rounds: int) -> tuple[bool, str]:
    got_val, got_gate = lay.val_summary(r).is_file(), lay.gate_summary(r).is_file()
    if got_val and got_gate:
        return True, "val and gate summaries exist"
    return False, "val pending" if not got_val else "gate pending"


def run(loop: StageContext, r: int) -> None:
    cfg, lay = loop.cfg, loop.lay
    # ONE_JOB=1: the job's eval hook plays the round on its engines; whatever it left unplayed (a
    # job gone, a resumed run) is played here, the hook's episodes kept (both resume per episode)
    if not (cfg.ONE_JOB and one_job.evaluated_in_job(cfg, lay, r, lambda: done(lay, r, cfg.ROUNDS)[0], loop.echo)):
        eval_session.play(loop, r)
    write_record(loop.lay, r, "evaluate")
    eval_session.wandb_in_background(loop.cfg, loop.lay)
