"""The evaluate stage of a round (and the baseline val), in one process (architecture §4, M9).

1. ShopSimulator up (restarted by a watchdog thread if it dies, SHOPSIM_MAX_RESTARTS), every
   slot released: training has stopped and the run owns the simulator;
2. the SGLang eval server started on the round's `hf` export (TP=1, DP=NUM_GPUS); while it starts
   (minutes on the GPUs) the prompt builder's tokenizer is loaded -- once per loop process, as long
   as the tokenizer files stay the same (every export copies the base model's);
3. bare val, then -- once compile (which may run beside this stage: VAL_BESIDE_COMPILE) wrote
   compiled.json -- the random-masked gate, both resumable per episode;
4. the server stopped, also when a step fails; the stage record written.

W&B logging is not on this path: `pyhelpers run log-wandb` logs val/gate once, from the
summaries, in the background (started here) and again at the run's end.
"""

from __future__ import annotations

import hashlib
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from pyhelpers.config.load import Config
from pyhelpers.launch import services
from pyhelpers.run import gpu_time
from pyhelpers.run.layout import RunLayout
from pyhelpers.run.records import write_record
from pyhelpers.stages import inputs

if TYPE_CHECKING:
    from pyhelpers.stages.context import StageContext

LOG = "eval-server.log"  # the SGLang eval server's log: why val/gate could not play
COLOUR = "#2e7d32"
GPU_PHASE = gpu_time.SERVER  # run/gpu_time.py: its events mark server-start, episodes, server-stop


def reads(lay: RunLayout, r: int, seed_bank: Path | None) -> list[inputs.RunInput]:
    return [inputs.compiled(lay, r)]


def launches(cfg: Config, lay: RunLayout, r: int, model_args: list[str]) -> list[tuple[str, str, str]]:
    return [services.plan_line(cfg, lay, "eval-server", model=model_dir(cfg, lay)),
            ("evaluate", "", "no command line: bare val, then the gate, in the loop's own process")]


def done(lay: RunLayout, r: int, rounds: int) -> tuple[bool, str]:
    got_val, got_gate = lay.val_summary(r).is_file(), lay.gate_summary(r).is_file()
    if got_val and got_gate:
        return True, "val and gate summaries exist"
    return False, "val pending" if not got_val else "gate pending"


def _wandb_in_background(cfg: Config, lay: RunLayout) -> None:
    if cfg.WANDB_MODE != "disabled":
        services.run_in_background(cfg, lay, "wandb-log")


def builder_for(builders: dict, model_dir: str):
    """The prompt builder on model_dir's tokenizer, cached in `builders` (the Loop's, one per run
    process) by the tokenizer files' content."""
    # local: done() here is read by `make status`/`plan`; evaluate.val's httpx costs ~0.3 s
    from pyhelpers.evaluate import val

    d = Path(model_dir)
    key = hashlib.sha256(b"".join((d / f).read_bytes() for f in ("tokenizer.json", "tokenizer_config.json")
                                  if (d / f).is_file())).hexdigest()
    if key not in builders:
        builders[key] = val.load_builder(model_dir)
    return builders[key]


def model_dir(cfg: Config, lay: RunLayout, baseline: bool = False) -> str:
    """What the eval server serves: the round's HF export (`hf`), or the base model for the baseline."""
    return str(cfg.HF_MODEL if baseline else lay.hf_link)


def run(loop: StageContext, r: int) -> None:
    play(loop, r)


def play(loop: StageContext, r: int | None, *, baseline: bool = False) -> None:
    """Round r's val and gate, or (baseline=True, r None) the base model's bare val."""
    from pyhelpers.evaluate import round as rnd  # local: as in builder_for (httpx)
    from pyhelpers.evaluate.settings import EvalSettings

    cfg, lay, echo = loop.cfg, loop.lay, loop.echo
    model = model_dir(cfg, lay, baseline)
    echo(services.ensure(cfg, lay, "shopsim", round_=r, progress=echo))
    echo(f"ShopSimulator: {services.free_all_slots(cfg, lay, stage='evaluate', round_=r)}")
    stop = threading.Event()
    watchdog = None
    if r is not None:
        watchdog = threading.Thread(target=services.watch_shopsim, daemon=True, name="shopsim-watchdog",
                                    args=(cfg, lay, r, stop.wait, echo, echo))
        watchdog.start()
    try:
        services.start(cfg, lay, "eval-server", model=model, round_=r, progress=echo)
        ready: list = []  # the readiness wait runs beside the tokenizer load, so its event is exact
        waiter = threading.Thread(target=lambda: ready.append(_wait(cfg, lay, model=model, r=r)), daemon=True)
        waiter.start()
        settings = EvalSettings.from_config(cfg, tokenizer_dir=model)
        builder = builder_for(loop.builders, model)
        waiter.join()
        if isinstance(ready[0], BaseException):
            raise ready[0]
        echo(ready[0])
        if baseline:
            rnd.play_val(cfg, settings, builder, out=lay.baseline_val_dir, round_no=None, label="baseline",
                         tasks_path=None, resume=True, echo=echo, progress=loop.eval_stream or sys.stderr)
        else:
            rnd.play_val(cfg, settings, builder, out=lay.val_dir(r), round_no=r, label=lay.round_dir(r).name,
                         tasks_path=None, resume=True, echo=echo, progress=loop.eval_stream or sys.stderr)
            loop.wait_beside(r, "compile")  # the gate tests compiled.json's skills
            rnd.play_gate(cfg, settings, lambda: builder, round_dir=lay.round_dir(r), tasks_path=None, resume=True,
                          echo=echo, progress=loop.eval_stream or sys.stderr)
    finally:
        stop.set()
        for line in services.stop(cfg, lay, "eval-server"):
            echo(line)
        if watchdog is not None:
            watchdog.join(timeout=5)
    if not baseline:
        write_record(lay, r, "evaluate")
    _wandb_in_background(cfg, lay)


def _wait(cfg: Config, lay: RunLayout, model: str, r: int | None):
    try:
        return services.wait(cfg, lay, "eval-server", model=model, round_=r)
    except BaseException as exc:  # handed to the main thread, which raises it
        return exc
