"""The training loop's decisions, in one long-lived process: `pyhelpers run loop` (architecture §4).

bin/train (bash) takes the run lock, traps signals, stops what a killed driver left, sources
slime's model script, and starts this loop as its own child. The loop derives the next stage from
the artifacts (stages/position.position), runs it, and repeats until the run is done. Each stage
is a file in pyhelpers/stages/ (run and done); that package's __init__ is the registry, which
orders them (`make plan` lists a run's stages; README's "A run, start to end" says what each does).
A stage runs with this Loop as its StageContext (stages/context.py), and names no other stage.

Self-healing (pyhelpers/loop/supervisor.py): a stage that fails for a transient cause is restarted
the way `make resume` would (job and services stopped, a backoff, the next stage derived again),
within MAX_RESTARTS / MAX_RESTARTS_PER_STAGE; a permanent cause stops the run with the reason.
Each restart is an event (`run-restart`: stage, cause, log excerpt), shown by `make status`.
Notifications (pyhelpers/loop/notify.py) go out on start, each round's end, restarts and the end.

One process for the whole run keeps each round transition to a few hundred milliseconds of our
own time (architecture §10: no interpreter start or `import transformers` per stage). It dies with
the driver (PR_SET_PDEATHSIG): everything long-lived it starts -- the job, the services, the
converter -- is recorded (pids/, slime-job.json), so `make resume` finds and stops it.
TERM/INT (make stop, Ctrl-C) raise Stopped wherever the loop is; each stage's `finally` stops
what that stage started.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from pyhelpers import stages
from pyhelpers.config import ray_ports
from pyhelpers.config.load import Config
from pyhelpers.errors import Stopped, ToolkitError
from pyhelpers.evaluate import results
from pyhelpers.jsonfiles import load_json_or_none
from pyhelpers.launch import cluster, node_heartbeats, ray_nodes, services, slime_job
from pyhelpers.loop import node_verdict, supervisor
from pyhelpers.loop.notify import Notifier
from pyhelpers.procs import groups, procfs
from pyhelpers.rollout.metrics import last_record
from pyhelpers.run import events, stop
from pyhelpers.run.layout import RunLayout
from pyhelpers.stages import position, progress

Echo = Callable[[str], None]


class BesideFailed(Exception):  # noqa: N818 - a carrier, not an error of its own
    """A stage that ran beside another (or the other) failed: `stage` names which, `error` is why."""

    def __init__(self, stage: str, error: BaseException):
        super().__init__(f"{stage}: {error}")
        self.stage, self.error = stage, error


def _on_signal(signum, _frame):
    # Once: the stages stop what they started on the way out, and a second Ctrl-C (the terminal
    # sends each one to us too) or the driver's TERM must not cut that short.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    raise Stopped(signal.Signals(signum).name)


@dataclass
class Loop:
    """The `run loop` process: the stages of pyhelpers/stages run with this object, which
    holds what lives as long as the run's process does."""
    cfg: Config
    lay: RunLayout
    model_args: list[str]
    echo: Echo
    notifier: object = None
    status: Echo = lambda text: None  # the updating line on a terminal (console.Console.status)
    progress_stream: TextIO | None = None  # where a stage draws its progress (console.Console.stream)
    # (round, stage) -> (its thread, [its exception]) for a stage running beside the next (BESIDE)
    beside: dict[tuple[int, str], tuple[threading.Thread, list]] = field(default_factory=dict)

    def __post_init__(self):
        if self.notifier is None:
            self.notifier = Notifier.from_config(self.cfg, log=self.echo)
        self.supervisor = supervisor.Supervisor.from_config(self.cfg)

    def round_done(self, r: int) -> None:
        """Called by the inject stage: notify, then the report (`make report` reads the run's
        files) in the background, off the loop's path -- except after the last round: the run's
        end writes the report seconds later (run loop's _final_report, which would stop this one),
        so a background one would only draw the same figures twice. A run that stops in between
        gets it from `make resume` (which ends the run the same way) or `make report`."""
        self.notifier.send("round-done", self._round_headline(r), round=r)
        if r < self.cfg.ROUNDS - 1:
            services.run_in_background(self.cfg, self.lay, "report")

    def eta(self, evs: list[dict], r: int, stage: str, steps_done: int) -> progress.Eta:
        """Round r's ETA standing at `stage` (the train stage's step watcher asks)."""
        return progress.estimate(evs, stages.ROUND, rounds=self.cfg.ROUNDS, steps=self.lay.steps_per_round,
                                 r=r, stage=stage, steps_done=steps_done, wandb=self.cfg.WANDB_MODE != "disabled")

    def _round_headline(self, r: int) -> str:
        row = next((x for x in results.results(self.cfg, self.lay) if x["round"] == r), {})
        parts = [x for x in (row.get("val"), row.get("gate")) if x]
        return f"round {r} of {self.cfg.ROUNDS} done: " + ("; ".join(parts) or "no results")

    # --- a stage beside the next (stages/__init__.py BESIDE) ---------------------------------
    def wait_beside(self, r: int, stage: str) -> None:
        """Called by a stage that needs the artifact of `stage`, started beside it: wait for it to
        end; its failure is raised as BesideFailed (the loop restarts or stops under its name).
        Returns at once when it does not run beside (its artifact then exists: the loop ran it first)."""
        got = self.beside.pop((r, stage), None)
        if got is None:
            return
        thread, err = got
        thread.join()
        if err:
            raise BesideFailed(stage, err[0]) from err[0]

    def _start_beside(self, r: int, stage: str) -> None:
        err: list = []

        def go():
            try:
                self.run_stage(r, stage)
            except BaseException as exc:  # noqa: BLE001 - handed to wait_beside, which raises it
                err.append(exc)
        thread = threading.Thread(target=go, daemon=True, name=f"{stage}-r{r:03d}")
        self.beside[(r, stage)] = (thread, err)
        thread.start()

    def _settle_beside(self) -> None:
        """After a failure: let what runs beside end before the restart stops everything (compile
        writes compiled.json atomically; what it did not finish the next position() runs again)."""
        for key in list(self.beside):
            thread, _ = self.beside.pop(key)
            thread.join()

    def _run_position(self, r: int, stage: str) -> None:
        st = stages.get(stage)
        if st.beside and self.cfg.VAL_BESIDE_COMPILE:
            self.echo(f"round {r}: {st.beside} starts beside {stage} (VAL_BESIDE_COMPILE=1)")
            self._start_beside(r, stage)
            try:
                self.run_stage(r, st.beside)
            except Stopped:
                for rr, name in list(self.beside):  # stopped with it: its end, so no driver-lost names it
                    self.beside.pop((rr, name))
                    events.append(self.lay.run_dir, "stage-end", round=rr, stage=name, status=143, seconds=None)
                raise
            except BesideFailed:
                raise
            except Exception as exc:
                self._settle_beside()
                raise BesideFailed(st.beside, exc) from exc
            self.wait_beside(r, stage)  # a stage that never waited for it: its end and failure still count
        else:
            self.run_stage(r, stage)

    # --- the loop --------------------------------------------------------------------------
    def run_stage(self, r: int, stage: str) -> None:
        events.append(self.lay.run_dir, "stage-start", round=r, stage=stage)
        t0, status = time.monotonic(), 1
        try:
            stages.get(stage).run(self, r)
            status = 0
        except Stopped:
            status = 143
            raise
        finally:
            events.append(self.lay.run_dir, "stage-end", round=r, stage=stage, status=status,
                          seconds=round(time.monotonic() - t0, 3))

    def run(self, stop_before: str | None = None) -> str:
        """Stages until the run is done ("done") or the next is `stop_before` ("stopped-before").
        Transient failures are restarted (see the module doc); a permanent one raises ToolkitError."""
        self._note_lost_driver()
        first = position.position(self.lay, self.cfg.ROUNDS, self.cfg.BASELINE_VAL)
        if not first.finished:
            self.notifier.send("run-start", f"run started at round {first.round}, stage {first.stage} "
                                            f"({self.cfg.ROUNDS} rounds of {self.cfg.STEPS_PER_ROUND} steps)")
        done = threading.Event()
        if self.cfg.multinode:  # when each worker's heartbeat changes, by this machine's clock
            threading.Thread(target=node_heartbeats.watch_heartbeats, args=(self.lay, done.wait, procfs.hostname()),
                             daemon=True, name="heartbeats").start()
        try:
            end = self._stages(stop_before)
        except Stopped:
            self.notifier.send("run-stopped", "run stopped (make stop or Ctrl-C); continue with make resume")
            raise
        except ToolkitError as exc:
            self.notifier.send("run-failed", f"run FAILED: {exc.what}"[:1500])
            raise
        finally:
            done.set()
            self.notifier.close()
        return end

    def _note_lost_driver(self) -> None:
        """A stage the previous driver started and never ended: it died there (kill -9, OOM, a
        reboot; make stop ends its stage). Recorded, so make status and the report show the kill."""
        start = events.unfinished_stage(events.read(self.lay.run_dir))
        if start:
            events.append(self.lay.run_dir, "driver-lost", round=start.get("round"), stage=start.get("stage"),
                          cause="killed", detail=f"the driver died during round {start.get('round')} "
                                                 f"{start.get('stage')} (started {start.get('at')}); this driver "
                                                 "stopped what it left and went on")
            self.echo(f"the previous driver died during round {start.get('round')} {start.get('stage')} "
                      "(recorded; make status and the report show it)")

    def _stages(self, stop_before: str | None) -> str:
        while True:
            if self.lay.stopped_marker.is_file():  # make stop, between two stages: asked for, not an error
                raise Stopped("make stop")
            pos = position.position(self.lay, self.cfg.ROUNDS, self.cfg.BASELINE_VAL)
            if pos.finished:
                self.notifier.send("run-done", f"run finished: {self.cfg.ROUNDS} rounds")
                return "done"
            if pos.stage == stop_before:
                return "stopped-before"
            self.echo(f"round {pos.round}: {pos.stage} ({pos.detail})")
            try:
                self._run_position(pos.round, pos.stage)
            except Stopped:
                raise
            except BesideFailed as exc:  # under the name of the stage that failed
                self._failed(pos.round, exc.stage, exc.error)
            except Exception as exc:  # noqa: BLE001 - every failure is classified; bugs are permanent
                self._failed(pos.round, pos.stage, exc)

    def _failed(self, r: int, stage: str, exc: Exception) -> None:
        """Restart after a transient failure (returns), or raise ToolkitError with the reason."""
        log = stages.get(stage).log
        tail = "\n".join(groups.log_tail(self.lay.logs / log, 40)) if log else ""
        failure = supervisor.classify_exception(stage, r, step=self._step(r, stage), exc=exc, log_text=tail)
        lost = self._lost_nodes() if failure.cause not in ("node-lost", "ray-lost", "bug", "config", "flag") else []
        if not lost and self.cfg.multinode and failure.cause in ("engine", "node"):  # before Ray saw the node go
            lost = supervisor.refused_workers(f"{exc}\n{tail}", [w["addr"] for w in self._placed() if w.get("addr")])
            if not lost and services.alive(self.lay, "ray-head"):  # (a lost head ends its workers' Ray too)
                lost = node_verdict.ask_agents(self.lay, self._placed(), self.echo)
        if lost:  # the job died of it, whatever its last line says (an actor's death may be read first)
            failure = supervisor.node_lost(failure, "; ".join(lost))
        decision = self.supervisor.decide(failure)
        self.echo(f"{type(exc).__name__}: {exc}")
        if not decision.restart:
            events.append(self.lay.run_dir, "run-failed", round=r, stage=stage, cause=failure.cause,
                          verdict=failure.kind, reason=decision.reason)
            then = "fix the cause, then `make resume`" if failure.kind == supervisor.PERMANENT \
                else "look at the logs (make logs), then `make resume`"
            where, fix = f"run {self.lay.run_dir.name}", then
            if isinstance(exc, ToolkitError) and exc.where:  # it names the file: the run's last line keeps it
                where, fix = exc.where, (exc.fix if "make resume" in exc.fix else
                                         f"{exc.fix}; then `make resume`" if exc.fix else then)
            raise ToolkitError(f"the run stopped: {decision.reason}", where, fix) from exc
        n = len(self.supervisor.seen)
        events.append(self.lay.run_dir, "run-restart", round=r, stage=stage, step=failure.step, cause=failure.cause,
                      excerpt=failure.excerpt, attempt=n, wait_s=decision.wait_s, error=type(exc).__name__)
        what = "the job" if failure.cause == "node-lost" and self.cfg.multinode else "the job and the services"
        self.echo(f"restart {n} of at most {self.supervisor.max_restarts}: {decision.reason}; "
                  f"stopping {what}, then resuming in {decision.wait_s:g} s")
        self.notifier.send("restart", f"restart {n}: {decision.reason}"[:1500], round=r, stage=stage,
                           cause=failure.cause)
        if failure.cause == "node-lost" and self.cfg.multinode:
            self._wait_for_lost_node(decision.wait_s)
            return
        self._stop_everything()
        time.sleep(decision.wait_s)  # a TERM meanwhile raises Stopped: make stop is final

    def _wait_for_lost_node(self, wait_s: float) -> None:
        """A worker node left mid-round: only the job is stopped -- the head, the other workers and
        ShopSimulator stay, so the lost node rejoins the same cluster (`make join` there) -- then
        the cluster is awaited whole for up to JOIN_TIMEOUT (raises, naming the missing node, when
        it is not). The train stage then continues from the last checkpoint: slime replays the
        steps after it, whose records the plugin rewrites, so nothing is counted twice."""
        cfg = self.cfg
        self.echo(slime_job.stop(cfg, self.lay))
        time.sleep(wait_s)
        port = cfg.RAY_DASHBOARD_PORT
        self.echo(f"waiting up to {cfg.JOIN_TIMEOUT:g} s (JOIN_TIMEOUT) for the cluster to be whole "
                  "again (its agent joins it again on its own; `make join` there if the agent ended)")
        nodes = ray_nodes.wait_for(cfg.NNODES, cfg.NUM_GPUS, cfg.JOIN_TIMEOUT,
                                   nodes=lambda: ray_nodes.list_nodes(port, self.lay.run_dir, self._raylet_port()),
                                   progress=self.echo, replaced=self._replaced_ids)
        events.append(self.lay.run_dir, "nodes-whole", nodes=[n.ip for n in nodes])

    def _raylet_port(self) -> int:
        return ray_ports.port_of(self.cfg, "raylet")  # every node's raylet: the run's port block

    def _placed(self) -> list[dict]:
        """The workers the job was placed on (nodes.json, written as the train stage starts)."""
        return (load_json_or_none(self.lay.run_dir / "nodes.json") or {}).get("workers") or []

    def _replaced_ids(self) -> set[str]:
        """The Ray node ids the job was placed on whose agent has started its Ray again since: gone,
        even while Ray lists them ALIVE and the new raylet answers on their port."""
        return {w["id"] for w in self._placed() if w.get("ray") is not None
                and cluster.ray_generation(self.lay, w["addr"]) not in (None, w["ray"])}

    def _lost_nodes(self) -> list[str]:
        """A multi-node run's workers that are gone now, or were replaced under the job ([] when
        neither the head nor the workers' records can tell)."""
        if not self.cfg.multinode:
            return []
        placed, replaced = self._placed(), self._replaced_ids()
        # first the workers' own records: an agent that started its Ray again since the job was placed
        # (its raylet killed) may already answer on the same port while Ray still lists the old node ALIVE
        restarted = [node_verdict.restarted(w["addr"]) for w in placed if w.get("id") in replaced]
        if not services.alive(self.lay, "ray-head"):
            return restarted
        try:
            nodes = ray_nodes.list_nodes(self.cfg.RAY_DASHBOARD_PORT, self.lay.run_dir, self._raylet_port())
        except Exception:  # noqa: BLE001 - no answer: classify by the records and the log alone
            return restarted
        # a node lost, or listed twice (the rejoined one beside the old entry Ray has not retired yet);
        # then the records; then a placed node gone under its id. One line per address, the first.
        gaps = [gap for gap in ray_nodes.missing(nodes, self.cfg.NNODES, self.cfg.NUM_GPUS) if " lost (" in gap]
        first = {}
        for gap in gaps + restarted + ray_nodes.replaced(nodes, placed):
            first.setdefault(gap.split()[0], gap)
        return list(first.values())

    def _stop_everything(self) -> None:
        for line in stop.cleanup(self.lay, ray_temp_dir=self.cfg.ray_temp_dir, grace=self.cfg.STOP_GRACE,
                                    stop_job=lambda: slime_job.stop(self.cfg, self.lay)):
            self.echo(line)

    def _step(self, r: int, stage: str) -> int | None:
        """The training step in progress when train failed: one past the last the plugin finished."""
        if not stages.get(stage).stepped:
            return None
        rec = last_record(self.lay.rollout_metrics(r))
        return int(rec["rollout_id"]) + 1 if rec else r * self.lay.steps_per_round


def install_signal_handlers() -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _on_signal)
