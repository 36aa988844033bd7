"""What a stage's `run(ctx, r)` may use of the process running it: the driver's Loop
(pyhelpers/loop/loop.py) is the one implementation. Declared here, as a Protocol, so the stages
sit below the loop that runs them and never import it (architecture §2). It holds what every stage
may ask of the loop's process, nothing of one stage: state that stages share lives in the module
below them that they share (the analyst's drains: analyst/drain.py; the eval prompt builders:
evaluate/builders.py). tests/test_stage_registry.py checks that stages use nothing else of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TextIO

from pyhelpers.config.load import Config
from pyhelpers.run.layout import RunLayout
from pyhelpers.stages.progress import Eta

Echo = Callable[[str], None]


class Notifier(Protocol):
    def send(self, event: str, text: str, **fields: Any) -> None: ...


class StageContext(Protocol):
    cfg: Config                        # the run's configuration
    lay: RunLayout
    model_args: list[str]              # extra slime arguments from `make train ARGS=...`
    echo: Echo                         # a line on the driver's console and log
    status: Echo                       # the updating line on a terminal
    notifier: Notifier                 # webhook messages (disk-low, round-done, ...)
    progress_stream: TextIO | None     # where a stage draws its progress in place (the console's), or None: stderr

    def round_done(self, r: int) -> None: ...  # the round's last stage: notify, the report in the background

    def eta(self, evs: list[dict], r: int, stage: str, steps_done: int) -> Eta: ...  # round r's, standing at stage

    # wait for `stage`, started beside the caller (the registry's BESIDE), to end; raises its failure
    def wait_beside(self, r: int, stage: str) -> None: ...
