"""The analyst loop: scan spool/, batch, ask the model, write candidates/<batch_id>.json.

Up to ANALYST_CONCURRENCY batches are in flight at once (each request still takes its rate slot in
line: budget.py); the files and counters are shared under one lock. Per batch: a ``planned`` ledger line, the request (with retries), the reply parsed and checked
against proposal.schema.json (one "JSON only" follow-up request if it is unusable), the candidate
file written atomically, a ``written`` ledger line. A crash anywhere leaves either no candidate
file for the batch (it is sent again, with the same records, so the same file name) or a complete
one (its records are done). Nothing in here raises for a batch: errors are counted and logged and
the loop goes on, because the analyst must never stop training. Outcome codes: EXIT_* below.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from pyhelpers.analyst import prompt
from pyhelpers.analyst.budget import Budget, CapReached, Clock, Stopped
from pyhelpers.analyst.client import ChatClient, ChatError, FatalError, RejectedError, TransientError
from pyhelpers.analyst.ledger import Ledger, RoundLock, batch_id, require_round
from pyhelpers.analyst.stats import Stats, WandbLog, WandbOptions
from pyhelpers.config.load import Config
from pyhelpers.errors import ToolkitError
from pyhelpers.jsonfiles import validate, write_json_atomic

log = logging.getLogger("pyhelpers.analyst")

EXIT_OK = 0  # loop: stopped by TERM/INT; drain: nothing left
EXIT_LEFT = 3  # drain ended with records left (deadline, spend cap or outage); they wait for a later run
EXIT_FATAL = 4  # the endpoint refuses every request (401/403/404/arrearage): stopped calling
EXIT_LOCKED = 5  # another analyst holds this round dir


@dataclass(frozen=True)
class Settings:
    round_dir: Path
    round: int
    base_url: str
    model: str
    batch_size: int
    max_rpm: float
    max_calls: int
    timeout: float
    drain_timeout: float
    poll_interval: float
    retries: int
    backoff: float
    backoff_max: float
    concurrency: int = 1  # batches in flight at once

    @classmethod
    def from_config(cls, cfg: Config, round_dir: Path, round_no: int | None = None) -> Settings:
        round_dir = Path(round_dir)
        return cls(round_dir=round_dir, round=require_round(round_dir, round_no),
                   base_url=cfg.ANALYST_BASE_URL, model=cfg.ANALYST_MODEL,
                   batch_size=cfg.ANALYST_BATCH_SIZE, max_rpm=cfg.ANALYST_MAX_RPM,
                   max_calls=cfg.ANALYST_MAX_CALLS, timeout=cfg.ANALYST_TIMEOUT,
                   drain_timeout=cfg.ANALYST_DRAIN_TIMEOUT,
                   poll_interval=cfg.ANALYST_POLL_INTERVAL, retries=cfg.ANALYST_RETRIES,
                   backoff=cfg.ANALYST_BACKOFF, backoff_max=cfg.ANALYST_BACKOFF_MAX,
                   concurrency=cfg.ANALYST_CONCURRENCY)

    def public(self) -> dict:
        """What goes into W&B config: no secrets exist in here, and no host paths."""
        return {k: v for k, v in asdict(self).items() if k != "round_dir"}


@dataclass
class Outcome:
    code: int
    why: str  # drained | deadline | spend cap | stopped | fatal: ... | locked
    left: int
    stats: dict


class Sidecar:
    def __init__(self, s: Settings, api_key: str, stop: threading.Event, drain: bool,
                 wandb: WandbOptions | None = None):
        self.s, self.drain, self.stop = s, drain, stop
        adir = s.round_dir / "analyst"
        self.ledger = Ledger(s.round_dir, s.round)
        self.stats = Stats(adir / "stats.json")
        self.budget = Budget(adir / "calls.json", s.max_calls, s.max_rpm)
        self._mu = threading.RLock()  # the ledger, the stats and W&B, shared by the batches in flight
        self.client = ChatClient(s.base_url, s.model, api_key, timeout=s.timeout, retries=s.retries,
                                 backoff=s.backoff, backoff_max=s.backoff_max, budget=self.budget,
                                 on_error=self._error)
        self.lock = RoundLock(adir / "lock")
        self.wandb_opts, self.wb, self._logged = wandb, None, None
        self._ended: BaseException | None = None  # what ended the current pass early (_one)
        self.clock = Clock(stop, time.monotonic() + s.drain_timeout if drain else None)

    # -- one batch -------------------------------------------------------------------------
    def _error(self, kind: str) -> None:
        with self._mu:
            self.stats.error(kind)

    def _ask(self, messages: list[dict]) -> str:
        reply = self.client.complete(messages, self.clock)  # outside the lock: the wait is the point
        with self._mu:
            self.stats.request_done(reply.latency)
        return reply.content

    def process(self, batch: list[dict]) -> None:
        """Send one batch and write its candidate file. Raises TransientError (batch stays
        pending), FatalError, CapReached or Stopped (nothing written for the batch)."""
        ids = sorted(r["id"] for r in batch)
        bid = batch_id(ids)
        messages = prompt.build_messages(batch)
        doc = {"schema_version": 1, "batch_id": bid, "round": self.s.round, "record_ids": ids,
               "analyst_model": self.s.model, "prompt_hash": prompt.prompt_hash(messages),
               "status": "ok", "reason": None, "proposals": []}
        with self._mu:
            self.ledger.mark_planned(bid, ids)
        log.info("batch %s: %d record(s), asking %s", bid, len(ids), self.s.model)
        try:
            content = self._ask(messages)
            try:
                doc["proposals"], dropped = prompt.parse_reply(content, ids)
            except prompt.ReplyError as first:
                self._error("bad_reply")
                log.warning("batch %s: unusable reply (%s); one JSON-only follow-up", bid, first)
                try:
                    content = self._ask(prompt.nudge_messages(messages, content, str(first)))
                    doc["proposals"], dropped = prompt.parse_reply(content, ids)
                except prompt.ReplyError as second:
                    self._error("bad_reply")
                    raise RejectedError("bad_reply", f"{second} (also after a JSON-only follow-up)") from None
                except (TransientError, CapReached) as exc:
                    raise RejectedError("bad_reply", f"{first} (follow-up not sent or failed: {exc})") from None
            with self._mu:
                self.stats.proposals_dropped += dropped
        except RejectedError as exc:
            doc.update(status="rejected", reason=exc.reason[:500], proposals=[])
        validate(doc, "candidates", f"batch {bid}")
        with self._mu:
            write_json_atomic(self.ledger.candidates / f"{bid}.json", doc)
            self.ledger.mark_written(doc)
            log.info("batch %s: %s, %d proposal(s)%s", bid, doc["status"], len(doc["proposals"]),
                     f" ({doc['reason']})" if doc["reason"] else "")
            self._publish()

    # -- bookkeeping -------------------------------------------------------------------------
    def _publish(self) -> None:
        self.stats.update(self.ledger.totals(), self.budget.calls, max_calls=self.s.max_calls,
                          pending=self.ledger.pending_count())
        self.stats.save()
        metrics = self.stats.metrics()
        if self.wb is not None and metrics != self._logged:  # log a row only when a total changed
            self.wb.log(metrics)
            self._logged = metrics

    def _safe_publish(self) -> None:
        try:
            with self._mu:
                self._publish()
        except Exception as exc:  # noqa: BLE001 - counters must not stop the loop
            log.warning("could not write analyst stats: %s: %s", type(exc).__name__, exc)

    def _unexpected(self, what: str, exc: BaseException) -> None:
        self._error("unexpected")
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        log.error("unexpected error %s (continuing): %s", what, self.client.redact(text))

    # -- the loop ----------------------------------------------------------------------------
    def _pass(self) -> str:
        """Send every batch that is ready. Returns a reason to leave the loop, or ""."""
        batches = self.ledger.plan(self.ledger.scan(), self.s.batch_size, partial=self.drain)
        if not batches:
            return "drained" if self.drain else self._idle()
        self._ended = None
        with ThreadPoolExecutor(max_workers=max(1, self.s.concurrency), thread_name_prefix="analyst-batch") as pool:
            outcomes = list(pool.map(self._one, batches))
        self._safe_publish()
        for ending in outcomes:  # a batch that met the cap, a refusal or the stop ends the pass
            if isinstance(ending, FatalError):
                raise ending
        for ending in outcomes:
            if isinstance(ending, (CapReached, Stopped)):
                raise ending
        if any(ending is not None for ending in outcomes):  # outage or bug: pause instead of spinning
            self.clock.wait(self.s.poll_interval)
        return ""

    def _one(self, batch: list[dict]) -> BaseException | None:
        """One batch of a pass: None when written, else why not (logged here unless it ends the pass)."""
        if self._ended is not None:  # a batch before this one met the cap, a refusal or the stop
            return self._ended
        if self.clock.stopped():
            return Stopped("stopped before sending")
        try:
            self.process(batch)
            return None
        except TransientError as exc:
            log.warning("batch of %s..: %s; it stays pending", batch[0]["id"], exc.reason)
            return exc
        except (FatalError, CapReached, Stopped) as exc:
            self._ended = exc  # the batches not yet started are not started (nor planned)
            return exc
        except ChatError as exc:
            log.warning("batch of %s..: %s", batch[0]["id"], exc.reason)
            return exc
        except Exception as exc:  # noqa: BLE001 - never crash training
            self._unexpected(f"in the batch starting {batch[0]['id']}", exc)
            return exc

    def _idle(self) -> str:
        self.clock.wait(self.s.poll_interval)
        return ""

    def run(self) -> Outcome:
        try:
            if not self.lock.acquire(self.clock, wait=self.drain):
                log.error("another analyst holds %s; not starting a second one", self.lock.path)
                return Outcome(EXIT_LOCKED, "locked", left=-1, stats={})
            try:
                return self._run_locked()
            finally:
                self.lock.release()
        except OSError as exc:  # the round dir itself is unusable (errors inside a batch are caught)
            raise ToolkitError(f"cannot use the round dir ({exc.strerror or exc})",
                               str(exc.filename or self.s.round_dir),
                               "check that it exists, is writable and its disk is not full") from None

    def _run_locked(self) -> Outcome:
        self.ledger.recover()
        if self.wandb_opts is not None:
            self.wb = WandbLog(self.wandb_opts)
        why, code, capped = "", EXIT_OK, False
        log.info("analyst %s on %s (batch %d, %d/%d calls used)", "draining" if self.drain else "watching",
                 self.s.round_dir, self.s.batch_size, self.budget.calls, self.s.max_calls)
        while not why:
            if self.stop.is_set():
                why = "stopped"
            elif self.clock.expired():
                why = "deadline"
            elif capped:  # loop: idle until TERM (the driver then drains and counts what is left)
                why = "spend cap" if self.drain else self._idle()
            else:
                try:
                    why = self._pass()
                except CapReached as exc:
                    log.warning("spend cap reached: %s; pending records wait (raise ANALYST_MAX_CALLS "
                                "and run again to process them)", exc)
                    capped = True
                except FatalError as exc:
                    log.error("the analyst endpoint refuses requests, stopping: %s", exc.reason)
                    why, code = f"fatal: {exc.reason}", EXIT_FATAL
                except Stopped:
                    why = "stopped" if self.stop.is_set() else "deadline"
                except Exception as exc:  # noqa: BLE001
                    self._unexpected("in the analyst loop", exc)
                    self.clock.wait(self.s.poll_interval)
        try:
            self.ledger.scan()
        except Exception as exc:  # noqa: BLE001
            self._unexpected("in the final scan", exc)
        left = self.ledger.pending_count()
        if code == EXIT_OK and self.drain and left:
            code = EXIT_LEFT
        self._safe_publish()
        if self.wb is not None:
            self.wb.finish(code)
        log.info("analyst done (%s): %d record(s) left, %d processed, %d call(s)", why, left,
                 len(self.ledger.processed), self.budget.calls)
        return Outcome(code, why, left=left, stats=self.stats.values)


def status(s: Settings) -> dict:
    """Where the round's analysis stands, read-only (the plan mode of `analyst run`): counts,
    the spend used, and the batches a drain would send next."""
    ledger = Ledger(s.round_dir, s.round, readonly=True)
    ledger.recover()
    pending = ledger.scan()
    calls = Budget(s.round_dir / "analyst" / "calls.json", s.max_calls, s.max_rpm).calls
    batches = [{"batch_id": batch_id([r["id"] for r in b]), "records": [r["id"] for r in b]}
               for b in ledger.plan(pending, s.batch_size, partial=True)]
    return {**ledger.totals(), "records_pending": len(pending), "calls": calls, "max_calls": s.max_calls,
            "quarantined": {name: reason for name, (_, reason) in sorted(ledger.quarantined.items())},
            "next_batches": batches}


def run(settings: Settings, api_key: str, stop: threading.Event, drain: bool,
        wandb: WandbOptions | None = None) -> Outcome:
    """Run the analyst until `stop` is set (drain=False) or until nothing is left / the drain
    deadline passes (drain=True)."""
    return Sidecar(settings, api_key, stop=stop, drain=drain, wandb=wandb).run()
