"""An eval server's session, as the evaluate stage (a round's val and gate) and the baseline stage
(the base model's bare val) both run it, in one process (architecture §4, M9). Not a stage itself:
the two stages share it here, and neither imports the other.

1. ShopSimulator up (restarted by a watchdog thread if it dies, SHOPSIM_MAX_RESTARTS), every
   slot released: training has stopped and the run owns the simulator;
2. the SGLang eval server started on the model (TP=1, DP=NUM_GPUS); while it starts (minutes on
   the GPUs) the prompt builder's tokenizer is loaded (evaluate/builders.py: once per process);
3. bare val, then -- once what runs beside (compile, VAL_BESIDE_COMPILE) wrote compiled.json --
   the random-masked gate, both resumable per episode;
4. the server stopped, also when a step fails.

W&B logging is not on this path: `pyhelpers run log-wandb` logs val/gate once, from the
summaries, in the background (wandb_in_background) and again at the run's end.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import TYPE_CHECKING

from pyhelpers.config.load import Config
from pyhelpers.evaluate.builders import builder_for
from pyhelpers.launch import services
from pyhelpers.run.layout import RunLayout

if TYPE_CHECKING:
    from pyhelpers.stages.context import StageContext

SERVER_LOG = "eval-server.log"  # the SGLang eval server's log: why val/gate could not play


def model_dir(cfg: Config, lay: RunLayout, baseline: bool = False) -> str:
    """What the eval server serves: the round's HF export (`hf`), or the base model for the baseline."""
    return str(cfg.HF_MODEL if baseline else lay.hf_link)


def wandb_in_background(cfg: Config, lay: RunLayout) -> None:
    if cfg.WANDB_MODE != "disabled":
        services.run_in_background(cfg, lay, "wandb-log")


def play(loop: StageContext, r: int | None, *, baseline: bool = False) -> None:
    """Round r's val and gate, or (baseline=True, r None) the base model's bare val."""
    from pyhelpers.evaluate import round  # local: as in evaluate/builders.py (httpx)
    from pyhelpers.evaluate.settings import EvalSettings

    cfg, lay, echo = loop.cfg, loop.lay, loop.echo
    progress = loop.progress_stream or sys.stderr
    model = model_dir(cfg, lay, baseline)
    echo(services.ensure(cfg, lay, "shopsim", round_=r, progress=echo))
    echo(f"ShopSimulator: {services.free_all_slots(cfg, lay, stage='evaluate', round_=r)}")
    # (the base model's val belongs to no round: nothing restarts a simulator that dies then)
    watched = services.shopsim_watched(cfg, lay, r, echo, echo) if r is not None else contextlib.nullcontext()
    with watched:
        try:
            services.start(cfg, lay, "eval-server", model=model, round_=r, progress=echo)
            ready: list = []  # the readiness wait runs beside the tokenizer load, so its event is exact
            waiter = threading.Thread(target=lambda: ready.append(_wait(cfg, lay, model=model, r=r)), daemon=True)
            waiter.start()
            settings = EvalSettings.from_config(cfg, tokenizer_dir=model)
            builder = builder_for(model)
            waiter.join()
            if isinstance(ready[0], BaseException):
                raise ready[0]
            echo(ready[0])
            if baseline:
                round.play_val(cfg, settings, builder, out=lay.baseline_val_dir, round_no=None, label="baseline",
                             tasks_path=None, resume=True, echo=echo, progress=progress)
            else:
                round.play_val(cfg, settings, builder, out=lay.val_dir(r), round_no=r, label=lay.round_dir(r).name,
                             tasks_path=None, resume=True, echo=echo, progress=progress)
                loop.wait_beside(r, "compile")  # the gate tests compiled.json's skills
                round.play_gate(cfg, settings, lambda: builder, round_dir=lay.round_dir(r), tasks_path=None, resume=True,
                              echo=echo, progress=progress)
        finally:
            for line in services.stop(cfg, lay, "eval-server"):
                echo(line)


def _wait(cfg: Config, lay: RunLayout, model: str, r: int | None):
    try:
        return services.wait(cfg, lay, "eval-server", model=model, round_=r)
    except BaseException as exc:  # handed to the main thread, which raises it
        return exc
