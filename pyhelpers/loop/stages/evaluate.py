"""The evaluate stage of a round (and the baseline val), in one process (design.md §4, M9).

1. ShopSimulator up (restarted by a watchdog thread if it dies, SHOPSIM_MAX_RESTARTS), every
   slot released: training has stopped and the run owns the simulator;
2. the SGLang eval server started on the round's `hf` export (TP=1, DP=NUM_GPUS); while it starts
   (minutes on the GPUs) the prompt builder's tokenizer is loaded -- once per loop process, as long
   as the tokenizer files stay the same (every export copies the base model's);
3. bare val, then the random-masked gate, both resumable per episode;
4. the server stopped, also when a step fails; the stage record written.

W&B logging is not on this path: `pyhelpers run log-wandb` logs val/gate once, from the
summaries, in the background (started here) and again at the run's end.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

from pyhelpers.launch import services
from pyhelpers.loop.stages import export as stages
from pyhelpers.run.layout import RunLayout


def _wandb_in_background(cfg, lay: RunLayout) -> None:
    if cfg.get("WANDB_MODE") != "disabled":
        services.run_in_background(lay, "wandb-log", "log-wandb")


_BUILDERS: dict[str, object] = {}


def builder_for(model_dir: str):
    """The prompt builder on model_dir's tokenizer, cached by the tokenizer files' content."""
    import hashlib
    from pathlib import Path

    from pyhelpers.evaluate import val

    d = Path(model_dir)
    key = hashlib.sha256(b"".join((d / f).read_bytes() for f in ("tokenizer.json", "tokenizer_config.json")
                                  if (d / f).is_file())).hexdigest()
    if key not in _BUILDERS:
        _BUILDERS[key] = val.load_builder(model_dir)
    return _BUILDERS[key]


def run(cfg, lay: RunLayout, r: int | None, echo: Callable[[str], None], baseline: bool = False) -> None:
    from pyhelpers.evaluate import round as rnd
    from pyhelpers.evaluate.settings import EvalSettings

    model = str(cfg.path("HF_MODEL") if baseline else lay.hf_link)
    echo(services.ensure(cfg, lay, "shopsim", round_=r, progress=echo))
    echo(f"ShopSimulator: {services.release_all_slots(cfg)}")
    stop = threading.Event()
    watchdog = None
    if r is not None:
        watchdog = threading.Thread(target=services.watch_shopsim, daemon=True, name="shopsim-watchdog",
                                    args=(cfg, lay, r, stop.wait, echo, echo))
        watchdog.start()
    try:
        services.start(cfg, lay, "eval-server", model=model, round_=r, progress=echo)
        ready: list = []  # the readiness wait runs beside the tokenizer load, so its event is exact
        waiter = threading.Thread(target=lambda: ready.append(_wait(cfg, lay, model, r)), daemon=True)
        waiter.start()
        settings = EvalSettings.from_config(cfg, tokenizer_dir=model)
        builder = builder_for(model)
        waiter.join()
        if isinstance(ready[0], BaseException):
            raise ready[0]
        echo(ready[0])
        if baseline:
            rnd.play_val(cfg, settings, builder, lay.baseline_dir / "val", None, "baseline", None, True, echo,
                         sys.stderr)
        else:
            d = lay.round_dir(r)
            rnd.play_val(cfg, settings, builder, d / "val", r, f"round-{r:03d}", None, True, echo, sys.stderr)
            rnd.play_gate(cfg, settings, lambda: builder, d, None, True, echo, sys.stderr)
    finally:
        stop.set()
        for line in services.stop(cfg, lay, "eval-server"):
            echo(line)
        if watchdog is not None:
            watchdog.join(timeout=5)
    if not baseline:
        stages.write_record(lay, r, "evaluate", "ok")
    _wandb_in_background(cfg, lay)


def _wait(cfg, lay: RunLayout, model: str, r: int | None):
    try:
        return services.wait(cfg, lay, "eval-server", model=model, round_=r)
    except BaseException as exc:  # handed to the main thread, which raises it
        return exc
