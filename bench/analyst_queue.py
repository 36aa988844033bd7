"""The Failure Analyst's queue played on the modelled clock: how long compile waits for its drain.

The analyst answers in wall time while training plays its rollouts on this CPU (unscaled), and a
bench answer stands for a long modelled one (STRETCHED): how far it got through its backlog when
compile started was a race that a loaded machine won for it (longer rollouts in wall time, the same
answers), so the drain read off the recorded answers moved with the load. Here the queue is played
again from what does not race: when each spool record was written (its file's mtime), training's
and compile's starts and ends, all on the modelled clock without the analyst's answers; each
answer as long as the stand-in's (modelled), with the run's own limits (pyhelpers/analyst):

- beside training (the sidecar, sidecar.py `_run_locked`): a pass sends every full batch of the
  records written so far (ANALYST_BATCH_SIZE, in the ledger's grouping order), ANALYST_CONCURRENCY
  at once, each start in line at least 60/ANALYST_MAX_RPM after the last (budget.py); the next pass
  follows at once, or ANALYST_POLL_INTERVAL later when nothing was ready. At training's end it is
  stopped: answers in flight are abandoned and their records stay pending;
- the drain (drain.py, a thread from training's end): passes with the partial last batch too, until
  nothing is left, ANALYST_MAX_CALLS requests were sent this round (sidecar and drain together:
  calls.json), or ANALYST_DRAIN_TIMEOUT after its start (its deadline: an answer in flight then is
  abandoned). Compile waits for it (its own join timeout is a minute longer: the drain's ends first).

Compile's modelled drain is then what is left of the played drain at compile's start, plus
compile's own time (its window less the recorded answers: the merge, the drain's bookkeeping,
unscaled as everywhere). Not played: retries and errors (the stand-in answers every request),
a batch re-planned after an abandoned request keeps its records (batches of one in the bench).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import modelled_time

from pyhelpers.analyst.ledger import natural_key
from pyhelpers.run.layout import RoundFiles

KNOBS = ("ANALYST_CONCURRENCY", "ANALYST_BATCH_SIZE", "ANALYST_MAX_CALLS", "ANALYST_MAX_RPM",
         "ANALYST_POLL_INTERVAL", "ANALYST_DRAIN_TIMEOUT")


@dataclass(frozen=True)
class Analyst:
    """The analyst's limits on the modelled clock (its time knobs over the bench's scale)."""
    answer_s: float  # one answer (the stand-in's delay)
    concurrency: int
    batch: int
    max_calls: int
    slot_s: float  # 60 / ANALYST_MAX_RPM: requests start in line at least this far apart
    poll_s: float
    drain_s: float

    @classmethod
    def of_run(cls, run_dir: Path, answer_s: float, scale: float) -> Analyst:
        """From the run's manifest (run.json's config: the knobs as the run resolved them)."""
        path = run_dir / "run.json"
        config = json.loads(path.read_text(encoding="utf-8")).get("config", {})
        missing = [k for k in KNOBS if k not in config]
        if missing:
            raise SystemExit(f"{path}: its config has no {missing[0]}; the analyst's queue cannot be played "
                             f"(re-run the bench: a run of this toolkit records every knob)")
        rpm = float(config["ANALYST_MAX_RPM"])
        return cls(answer_s, int(config["ANALYST_CONCURRENCY"]), int(config["ANALYST_BATCH_SIZE"]),
                   int(config["ANALYST_MAX_CALLS"]), 60 / rpm / scale if rpm > 0 else 0.0,
                   float(config["ANALYST_POLL_INTERVAL"]) / scale, float(config["ANALYST_DRAIN_TIMEOUT"]) / scale)


@dataclass
class _Queue:
    a: Analyst
    records: list[tuple[float, str]]  # (written, id) in grouping order
    done: set[str]
    calls: int = 0
    last: float | None = None  # the last request's start (the rate slots are in line)

    def batches(self, t: float, partial: bool) -> list[list[str]]:
        ready = [rid for at, rid in self.records if at <= t and rid not in self.done]
        groups = [ready[i:i + self.a.batch] for i in range(0, len(ready), self.a.batch)]
        return [g for g in groups if partial or len(g) == self.a.batch]

    def play(self, batches: list[list[str]], t: float, stop: float) -> tuple[float, bool]:
        """One pass from t (sidecar.py `_pass`: a pool of ANALYST_CONCURRENCY); what is still in
        flight at `stop` is abandoned. Its end, and whether it met the spend cap."""
        free = [t] * max(1, self.a.concurrency)
        for batch in batches:
            if self.calls >= self.a.max_calls:
                return min(max(free), stop), True  # CapReached: the batches after it are not started
            w = free.index(min(free))
            start = free[w] if self.last is None else max(free[w], self.last + self.a.slot_s)
            if start >= stop:  # its rate slot comes after the stop: the pass waits for it until then
                return stop, False
            self.calls, self.last = self.calls + 1, start
            free[w] = start + self.a.answer_s
            if free[w] <= stop:
                self.done.update(batch)
        return min(max(free), stop), False


def drain_end(a: Analyst, records: list[tuple[float, str]], trained: tuple[float, float]) -> float:
    """When the drain ends (modelled seconds): spool `records` (written, id), the sidecar beside
    training from trained[0] to trained[1], the drain from trained[1] (module doc)."""
    q = _Queue(a, sorted(records, key=lambda r: natural_key(r[1])), set())
    t, capped = trained[0], False
    while t < trained[1] and not capped:  # the sidecar: full batches, a poll when none is ready
        batches = q.batches(t, partial=False)
        t, capped = q.play(batches, t, trained[1]) if batches else (t + a.poll_s, False)
    t, deadline, q.last = trained[1], trained[1] + a.drain_s, None  # the drain: a Budget of its own
    while not capped and t < deadline and (batches := q.batches(t, partial=True)):
        t, capped = q.play(batches, t, deadline)
    return min(t, deadline)


def spool(run_dir: Path) -> dict[int, list[tuple[float, str]]]:
    """Each round's spool records: (when its file was written, its id). The rollout writes each
    once, as its episode ends; the `step-done` event comes up to the step watcher's poll later,
    which on the modelled clock (inside the step's stretched wait) would read up to 30 s late."""
    out = {}
    for d in sorted((run_dir / "rounds").iterdir()) if (run_dir / "rounds").is_dir() else []:
        files = RoundFiles(d)
        if files.number is not None and files.spool.is_dir():
            out[files.number] = [(f.stat().st_mtime, f.name[:-5]) for f in files.spool.glob("*.json")
                                 if not f.name.startswith(".")]
    return out


def _covered(waits: list[dict], a: float, b: float) -> float:
    """Wall seconds of [a, b] inside at least one of the waits."""
    spans, total, reach = sorted((max(a, float(w["start"])), min(b, float(w["end"]))) for w in waits), 0.0, a
    for s, e in spans:
        if e > max(s, reach):
            total, reach = total + e - max(s, reach), e
    return total


def played(run_dir: Path, evs: list[dict], waits: list[dict], *, origin: float,
           dropped: tuple[tuple[float, float], ...], knob: str, job: str, drain: str) -> list[dict]:
    """The waits with the analyst's answers (`knob`) replaced by one wait per run of the `drain`
    stage that lasts its modelled drain (module doc); the `job` stage is the one the sidecar
    answers beside. A round with no spool records or no finished job run (resumed at compile)
    has no queue to play: its answers count as recorded (the one clock's reading)."""
    answers = [w for w in waits if w["knob"] == knob]
    plain = modelled_time.clock([w for w in waits if w["knob"] != knob], origin, dropped)
    spooled = {r: [(plain(at), rid) for at, rid in records] for r, records in spool(run_dir).items()}
    if not answers or not any(spooled.values()):
        return waits
    longest = max(answers, key=lambda w: float(w["modelled_s"]))  # an answer cut short records less
    a = Analyst.of_run(run_dir, float(longest["modelled_s"]), float(longest["waited_s"]) / float(longest["modelled_s"]))
    jobs = {r: (plain(s), plain(e)) for s, e, r in modelled_time.stage_windows(evs, job)}
    out = [w for w in waits if w["knob"] != knob]
    for s, e, r in modelled_time.stage_windows(evs, drain):
        if r not in jobs or not spooled.get(r):  # nothing to play: its answers as they were
            out += modelled_time.within(answers, knob, [(s, e)])
            continue
        left = max(0.0, drain_end(a, spooled[r], jobs[r]) - plain(s))
        own = (e - s) - _covered(answers, s, e)
        if e > s:
            out.append({"knob": knob, "start": s, "end": e, "waited_s": e - s, "modelled_s": left + own})
    return out
