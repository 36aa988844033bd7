"""The training loop's decisions, in one long-lived process: `pyhelpers run loop` (design.md §4).

bin/train (bash) takes the run lock, traps signals, stops what a killed driver left, sources
slime's model script, and starts this loop as its own child. The loop derives the next stage from
the artifacts (runstate.position), runs it, and repeats until the run is done:

    train     trainstage.run: services up, slime job submitted and watched, analyst beside it
    rotate    checkpoints.rotate (keeps the newest complete save)
    export    stages.run_export: the converter as a recorded service, `hf` flipped atomically
    compile   the analyst's drain awaited, then skills.steps.compile_step
    evaluate  evalstage.run: eval server (a service), bare val, gate
    inject    skills.steps.inject_step -> the next round's bank (last round: the final bank)
    baseline  the base model's bare val before round 0 (BASELINE_VAL=1)

One process for the whole run keeps each round transition to a few hundred milliseconds of our
own time (design.md §10: no interpreter start or `import transformers` per stage). It dies with
the driver (PR_SET_PDEATHSIG): everything long-lived it starts -- the job, the services, the
converter -- is recorded (pids/, slime-job.json), so `make resume` finds and stops it.
TERM/INT (make stop, Ctrl-C) raise Stopped wherever the loop is; each stage's `finally` stops
what that stage started.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from . import checkpoints as ck
from . import events, runstate, stages
from .errors import Stopped, ToolkitError
from .runlayout import RunLayout

Echo = Callable[[str], None]


def _on_signal(signum, _frame):
    raise Stopped(signal.Signals(signum).name)


@dataclass
class Loop:
    cfg: object
    lay: RunLayout
    model_args: list[str]
    echo: Echo

    # --- the stages ------------------------------------------------------------------------
    def train(self, r: int) -> None:
        from . import trainstage

        trainstage.run(self.cfg, self.lay, r, self.model_args, self.echo)

    def rotate(self, r: int) -> None:
        plan = ck.rotate(self.lay.megatron)
        for p in plan.delete:
            self.echo(f"rotate: deleted {p.relative_to(self.lay.save_dir)}")
        for note in plan.notes:
            self.echo(f"rotate: note: {note}")
        stages.write_record(self.lay, r, "rotate", "ok", kept=plan.keep, deleted=[p.name for p in plan.delete])

    def export(self, r: int) -> None:
        target, removed = stages.run_export(self.cfg, self.lay, r, self.lay.logs / "convert.log", progress=self.echo)
        self.echo(f"hf -> {target.name}" + (f" (removed {', '.join(p.name for p in removed)})" if removed else ""))

    def compile(self, r: int) -> None:
        from . import trainstage
        from .skills import bank as bank_mod
        from .skills.steps import change_summary, compile_step

        trainstage.drain_wait(self.cfg, self.lay, r, self.echo)
        d, hf = self.lay.round_dir(r), self.cfg.path("HF_MODEL")
        for sub in ("spool", "candidates"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        old, new, _ = compile_step(self.lay.bank_in(r), d / "candidates", r, hf if hf.is_dir() else None, d / "spool",
                                   self.cfg.float("SKILL_DUP_JACCARD"), self.cfg.int("SKILL_MAX_TOKENS"))
        out = self.lay.compiled(r)
        self.echo(change_summary(old, new, out, bank_mod.write_bank(out, new)))
        stages.write_record(self.lay, r, "compile", "ok", output=out)

    def evaluate(self, r: int) -> None:
        from . import evalstage

        evalstage.run(self.cfg, self.lay, r, self.echo)

    def inject(self, r: int) -> None:
        from .skills import bank as bank_mod
        from .skills.steps import caps_from, change_summary, inject_step

        decisions = self.lay.round_dir(r) / "gate" / "decisions.json"
        out = self.lay.bank_out(r, self.cfg.int("ROUNDS"))
        old, new = inject_step(self.lay.compiled(r), decisions if decisions.is_file() else None, r,
                               caps_from(self.cfg))
        self.echo(change_summary(old, new, out, bank_mod.write_bank(out, new)))
        stages.write_record(self.lay, r, "inject", "ok", output=out)

    def baseline(self, r: int) -> None:
        from . import evalstage

        evalstage.run(self.cfg, self.lay, None, self.echo, baseline=True)

    # --- the loop --------------------------------------------------------------------------
    def run_stage(self, r: int, stage: str) -> None:
        events.append(self.lay.run_dir, "stage-start", round=r, stage=stage)
        t0, status = time.monotonic(), 1
        try:
            getattr(self, stage)(r)
            status = 0
        except Stopped:
            status = 143
            raise
        finally:
            events.append(self.lay.run_dir, "stage-end", round=r, stage=stage, status=status,
                          seconds=round(time.monotonic() - t0, 3))

    def run(self, stop_before: str | None = None) -> str:
        """Stages until the run is done ("done") or the next is `stop_before` ("stopped-before")."""
        while True:
            if self.lay.stopped_marker.is_file():
                raise ToolkitError(f"run {self.lay.run_dir.name} was stopped by make stop",
                                   str(self.lay.stopped_marker), "continue it with `make resume`")
            pos = runstate.position(self.lay, self.cfg.int("ROUNDS"), self.cfg.flag("BASELINE_VAL"))
            if pos.finished:
                return "done"
            if pos.stage == stop_before:
                return "stopped-before"
            self.echo(f"[{time.strftime('%H:%M:%S')}] round {pos.round}: {pos.stage} ({pos.detail})")
            self.run_stage(pos.round, pos.stage)


def install_signal_handlers() -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _on_signal)
