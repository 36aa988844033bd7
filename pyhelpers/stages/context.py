"""What a stage's `run(ctx, r)` may use of the process running it: the driver's Loop
(pyhelpers/loop/loop.py) is the one implementation. Declared here, as a Protocol, so the stages
sit below the loop that runs them and never import it (architecture §2).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from pyhelpers.run.layout import RunLayout
from pyhelpers.stages.progress import Eta

Echo = Callable[[str], None]


class Notifier(Protocol):
    def send(self, event: str, text: str, **fields: Any) -> None: ...


class StageContext(Protocol):
    cfg: Any                           # the run's Config
    lay: RunLayout
    model_args: list[str]              # extra slime arguments from `make train ARGS=...`
    echo: Echo                         # a line on the driver's console and log
    status: Echo                       # the updating line on a terminal
    notifier: Notifier                 # webhook messages (disk-low, round-done, ...)
    drains: dict[int, threading.Thread]  # round -> its analyst drain (started by train, joined by compile)
    builders: dict[str, Any]           # tokenizer hash -> eval prompt builder, loaded once per process
    eval_stream: Any                   # where evaluate draws its episode progress (a file-like), or None

    def round_done(self, r: int) -> None: ...

    def eta(self, evs: list[dict], r: int, stage: str, steps_done: int) -> Eta: ...
