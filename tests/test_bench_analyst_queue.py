"""The GPU-idle bench plays the Failure Analyst's queue on the modelled clock (bench/analyst_queue.py,
issue 44). The analyst answers in wall time while training plays its rollouts on this CPU
(unscaled), so how far it got through its backlog when compile starts is a race that a loaded
machine wins for it: read off the recorded answers, compile's drain moved with the load. These
runs are synthetic (events, wait records, spool records written here, no rehearsal)."""

from __future__ import annotations

import json
import os

import pytest
from test_bench_beside_clock import ANALYST, SCALE, Recorder, idle_fraction, round_gpu_idle

ANSWER = 300  # modelled seconds of one answer (a bench answer stands for five: STRETCHED)
DRAIN = 600  # ANALYST_DRAIN_TIMEOUT, modelled
ROLLOUT = 10.0  # seconds of this CPU a step's rollout takes on a quiet machine
RECORDS = (8, 8, 8, 2)  # spool records each step's rollout writes
# The analyst's knobs as the bench's run.json records them (wall seconds, scaled).
CONFIG = {"ANALYST_CONCURRENCY": "1", "ANALYST_BATCH_SIZE": "1", "ANALYST_MAX_CALLS": "40",
          "ANALYST_MAX_RPM": f"{30 / SCALE:g}", "ANALYST_POLL_INTERVAL": "0.2",
          "ANALYST_DRAIN_TIMEOUT": f"{DRAIN * SCALE:.3f}"}


class Queued(Recorder):
    """A run with the analyst answering its spool records in wall time, one at a time: beside
    training from each record's arrival, its in-flight answer abandoned at train's end, then the
    drain from there until its deadline; compile waits for the drain. On this CPU a quiet
    machine's analyst falls behind (8 answers, 40 s, a step of 30.8 s); twice as loaded, its
    steps last 40.8 s and it keeps up -- in wall time. Modelled, a step is ~1260 s and its
    answers 2400 s: the analyst is behind either way and the drain lasts until its deadline."""

    def __init__(self, cpu: float = 1.0):
        super().__init__(cpu)
        self.spooled: list[tuple[int, str, float]] = []  # (round, record id, when written)

    def rollout(self, t: float, r: int, k: int) -> float:
        t = self.busy(t, ROLLOUT)
        step = r * len(RECORDS) + k
        self.spooled += [(r, f"r{r}-s{step}-g{step}-i{i}", t) for i in range(RECORDS[k])]
        return t

    def answer(self, start: float, stop: float) -> float:
        """One answer from `start`, cut at `stop` (the requester hung up): when it ended."""
        end = min(start + ANSWER * SCALE, stop)
        self.waits.append({"knob": ANALYST, "start": start, "end": end, "waited_s": ANSWER * SCALE,
                           "modelled_s": (end - start) / SCALE})
        return end

    def drain(self, t: float, r: int, answers: int) -> float:
        trained = max(e["t"] for e in self.evs if e["round"] == r and e.get("stage") == "train"
                      and e["kind"] == "stage-end")
        mine = [(rid, at) for rr, rid, at in self.spooled if rr == r]
        left, free = [], 0.0  # the analyst idle until the first record
        for rid, at in mine:
            start = max(free, at)
            if start >= trained or self.answer(start, trained) >= trained:
                left.append(rid)  # not sent, or abandoned at train's end: the drain sends it again
            free = max(free, min(start + ANSWER * SCALE, trained))
        deadline, free = trained + DRAIN * SCALE, trained
        for _ in left:
            if free >= deadline:
                break
            free = self.answer(free, deadline)
        self.ev(t, "stage-start", r, stage="compile")
        t = self.busy(max(t, free), 0.1)
        self.ev(t, "stage-end", r, stage="compile", status=0)
        return t

    def write(self, tmp):
        tmp = super().write(tmp)
        run = tmp / "runs" / "rehearsal"
        (run / "run.json").write_text(json.dumps({"config": CONFIG}))
        for r, rid, at in self.spooled:
            spool = run / "rounds" / f"round-{r:03d}" / "spool"
            spool.mkdir(parents=True, exist_ok=True)
            (spool / f"{rid}.json").write_text("{}")
            os.utime(spool / f"{rid}.json", (at, at))
        return tmp


def drains(tmp, cpu: float) -> list[float]:
    """Compile's modelled wait for the drain in each round, today's order (nothing beside it)."""
    rec, t = Queued(cpu), 1_000.0
    for r in (0, 1):
        t = rec.round(t, r, beside=False)
    rounds, _waits, _healed = round_gpu_idle.modelled_rounds(rec.write(tmp))
    return [rt.seconds["compile-wait"] for rt in rounds]


def test_the_analyst_getting_further_in_wall_time_does_not_move_the_drain(tmp_path):
    # In wall time the quiet run's analyst has ~3 answers left when compile starts, the loaded
    # one's none; on the modelled clock both are thousands of seconds behind, so the drain runs to
    # its deadline: 600 s after train's end, less the rotate and export stages between.
    quiet, loaded = drains(tmp_path / "quiet", 1.0), drains(tmp_path / "loaded", 2.0)
    assert loaded == pytest.approx(quiet, rel=0.01), f"compile's modelled drain quiet {quiet}, loaded {loaded}"
    assert quiet == pytest.approx([DRAIN - 60.5] * 2, abs=1)


def test_the_ratio_of_val_beside_compile_does_not_move_with_the_analyst_s_wall_time(tmp_path):
    frac = {(beside, cpu): idle_fraction(tmp_path / f"{beside}-{cpu}", beside, cpu, make=Queued)
            for beside in (False, True) for cpu in (1.0, 2.0)}
    quiet, loaded = frac[True, 1.0] / frac[False, 1.0], frac[True, 2.0] / frac[False, 2.0]
    assert loaded == pytest.approx(quiet, rel=0.01), f"ratio quiet {quiet:.3f}, loaded {loaded:.3f}"
