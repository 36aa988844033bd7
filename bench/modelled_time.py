"""A rehearsal's timeline in modelled seconds: each stand-in's wait (tests/fakes/modelled_wait.py's
records) counts the real seconds it models, the rest -- the toolkit's own time, its services'
starts on this CPU -- counts as it was, unscaled; inside the slime job's start and teardown only
the waits count (`job_gaps`: the delay table's figures are the whole of those phases), and a
step's end seen after the save began is the save's start (`steps_end_by_the_save`). A bench that multiplied the whole wall
time back by its scale multiplied this CPU's time too, and its verdict moved with the machine's
load; read this way, load moves only the unscaled part, by what it really costs.

The clock is piecewise linear: an instant covered by at least one wait runs at that wait's
modelled/waited rate (the largest where several overlap: the stand-ins share one scale, so they
agree up to a sleep's overrun), every other instant at 1. Overlapping waits (an analyst answer
during a training step, a server's many /generate calls) are so stretched once, not added.

One clock cannot read two activities that run at once and wait for different stand-ins: a stage
that waits for a drain (compile, for the analyst's answers) and the stage beside it (evaluate:
the eval server's start and bare val, VAL_BESIDE_COMPILE=1). On one clock every instant of the
drain's window runs at the analyst's rate, so the other's own time on this CPU (val's episode
handling, unscaled everywhere else) counted ~60x, and how much of the drain it covered moved with
the load. `timeline` gives each its own clock over their overlap (`Beside`):
- the drain: only its stand-in's waits (the drain knob's, inside the drain stage's window)
  stretch it, everything else counts as it was: its modelled length D;
- the stage beside it, from the overlap's start to its join (where it starts waiting for the
  drain: val's end, before the gate): every other stand-in's wait (the eval server's start, its
  /generate calls) stretches it, the drain's answers do not: its modelled length V;
- the overlap lasts max(D, V) modelled seconds from its start; each event in it is placed on its
  own activity's clock from there (what the beside stage writes while it waits: at the end). The
  report's split (pyhelpers/run/gpu_time.py) then bills the GPUs busy while val plays, idle in
  the server's start and while only the drain is waited for (compile-wait): max(D, V) minus val.
  After the join the one clock goes on from there. So this CPU's speed enters only as the real
  seconds of each activity's unscaled part, as everywhere else.
The one-job mode (ONE_JOB=1) has a second such pair: at a round's save the job's eval hook plays
bare val on the job's engines while the loop exports the checkpoint on the CPU (the converter's
wait), then compiles; the hook's gate waits for compile's end. On one clock the converter's rate
ran over val's end, and how much of the export val covered moved with when the loop noticed the
save (a one-job row 14 % apart beside two hogs). A `Pair` names each: its drain (a stage, or a
chain of stages run one after the other: export, then compile), the stand-ins it waits for, the
activity beside it and which events are the drain's; an overlap that starts inside an earlier
one is read on that one's clocks.
Where nothing overlaps (today's order: compile, then evaluate) `timeline` is the one clock.
"""

from __future__ import annotations

import bisect
import heapq
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyhelpers.run.gpu_time import when


def read_waits(path: Path) -> list[dict]:
    """The wait records of one run (FAKE_WAIT_LOG); none when no stand-in waited."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def clock(waits: list[dict], origin: float, dropped: tuple[tuple[float, float], ...] = ()) -> Callable[[float], float]:
    """A function from a wall time (time.time()) to modelled seconds since `origin`; the `dropped`
    wall intervals (a failed attempt, restarts.dropped) last nothing."""
    edges = []  # (time, 0 = a wait ends / 1 = starts, its rate, its index): ends first at a tie
    for a, b in dropped:  # index -1: a dropped interval (rate 0 while one is open)
        if b > a:
            edges += [(a, 1, 0.0, -1), (b, 0, 0.0, -1)]
    for i, w in enumerate(waits):
        s, e = float(w["start"]), float(w["end"])
        if e > s:
            rate = float(w["modelled_s"]) / (e - s)
            edges += [(s, 1, rate, i), (e, 0, rate, i)]
    edges.sort()
    cuts = [min([origin, *(t for t, *_ in edges[:1])])]
    rates: list[float] = []  # rates[i]: over [cuts[i], cuts[i + 1]); 1 after the last
    live: list[tuple[float, int]] = []  # a max-heap of (-rate, index) of the waits running
    gone: set[int] = set()
    dropping = 0
    for t, starts, rate, i in edges:
        while live and live[0][1] in gone:
            heapq.heappop(live)
        now = 0.0 if dropping else -live[0][0] if live else 1.0
        if t > cuts[-1]:
            rates.append(now)
            cuts.append(t)
        if i < 0:
            dropping += 1 if starts else -1
        elif starts:
            heapq.heappush(live, (-rate, i))
        else:
            gone.add(i)
    at = [0.0]  # modelled seconds since cuts[0] at each cut
    for (a, b), r in zip(zip(cuts, cuts[1:], strict=False), rates, strict=False):
        at.append(at[-1] + (b - a) * r)

    def raw(t: float) -> float:
        i = bisect.bisect_right(cuts, t) - 1
        if i < 0:  # before every cut: as it was
            return t - cuts[0]
        return at[i] + (t - cuts[i]) * (rates[i] if i < len(rates) else 1.0)
    base = raw(origin)
    return lambda t: raw(t) - base


def events(evs: list[dict], to: Callable[[float], float]) -> list[dict]:
    """The run's events with their times (t, and since where noticed after the fact) on the modelled
    clock, and their `seconds` (a duration that ends at t: an evaluation's episodes, a stage's run)
    as the modelled seconds of that interval."""
    return [_on(e, to) for e in evs]


def _on(e: dict, to: Callable[[float], float]) -> dict:
    e = dict(e)
    if isinstance(e.get("seconds"), (int, float)) and isinstance(e.get("t"), (int, float)):
        e["seconds"] = to(float(e["t"])) - to(float(e["t"]) - float(e["seconds"]))
    for key in ("t", "since"):
        if isinstance(e.get(key), (int, float)):
            e[key] = to(float(e[key]))
    return e


def within(waits: list[dict], knob: str, windows: list[tuple[float, float]]) -> list[dict]:
    """The waits, with those of `knob` cut to the parts inside `windows` (each part keeping its
    share of the modelled seconds): a wait that keeps the GPUs waiting only there. The analyst's
    answers hold the round only inside compile's wait for its drain; beside training they
    overlap the steps and their gaps (this CPU playing the rollouts), which they must not stretch."""
    out = []
    for w in waits:
        if w["knob"] != knob:
            out.append(w)
            continue
        s, e = float(w["start"]), float(w["end"])
        for a, b in windows:
            lo, hi = max(s, a), min(e, b)
            if hi > lo:
                out.append({**w, "start": lo, "end": hi, "modelled_s": float(w["modelled_s"]) * (hi - lo) / (e - s)})
    return out


def restarts(evs: list[dict]) -> tuple[tuple[float, float], ...]:
    """The failed attempts a run healed itself from: from the failed stage's start to the next
    stage-start after its run-restart. A restart is this machine failing (Ray's start timing out
    on an overloaded CPU), not the configuration under test: the bench drops these intervals."""
    out = []
    for i, e in enumerate(evs):
        if e.get("kind") != "run-restart":
            continue
        began = [float(x["t"]) for x in evs[:i] if x.get("kind") == "stage-start"
                 and x.get("stage") == e.get("stage") and x.get("round") == e.get("round")]
        again = [float(x["t"]) for x in evs[i + 1:] if x.get("kind") == "stage-start"]
        if began and again:
            out.append((began[-1], again[0]))
    return tuple(out)


def job_gaps(evs: list[dict], waits: list[dict], *, skip: str) -> tuple[tuple[float, float], ...]:
    """The slime job's own start and teardown on this CPU, outside every stand-in's wait (but
    `skip`'s, the analyst's, which holds no GPU there): from each job-submitted to the first
    rollout-started after it, and from each checkpoint-saved (or the episodes the job's eval hook
    played after it, the one-job mode) to the job-end after it. The delay
    table's figures are the whole of those phases on a real machine (megatron-start: submission,
    Megatron's init and load, the first weight sync; sglang-start and jit-cold: the engines';
    teardown: the engines and actors stopped, the driver's exit), so what the stand-ins spend
    beside their waits there -- Ray's job supervisor, the driver's, actors' and engines' Python
    starts, Ray stopping the actors -- stands for nothing more, and on this CPU it moved with the
    load (round 0's job-start 196-217 s quietly, 231-248 s beside two hogs). These gaps last
    nothing on the clock (`clock`'s dropped); the waits inside count, and the toolkit's own time
    around the job (services, submission, the log copier's stop) counts as it was."""
    windows = []
    for e in evs:
        ends = {"job-submitted": "rollout-started", "checkpoint-saved": "job-end"}.get(e.get("kind"))
        if ends:  # the first end after it in time: checkpoint-saved is written after job-end (its `since`)
            a = when(e)
            b = min((when(x) for x in evs if x.get("kind") == ends and x.get("round") == e.get("round")
                     and when(x) > a), default=None)
            if b is not None:
                # the one-job mode's job evaluates in it after its last save: its teardown begins
                # once the eval hook's last episodes ended
                a = max([a, *(float(x["t"]) for x in evs if x.get("kind") == "episodes" and a < float(x["t"]) < b)])
                windows.append((a, b))
    spans = sorted((float(w["start"]), float(w["end"])) for w in waits if w["knob"] != skip)
    gaps = []
    for a, b in windows:
        at = a
        for s, e in spans:
            if e <= at or s >= b:
                continue
            if s > at:
                gaps.append((at, s))
            at = max(at, e)
        if at < b:
            gaps.append((at, b))
    return tuple(gaps)


def steps_end_by_the_save(evs: list[dict], waits: list[dict], *, save: str) -> list[dict]:
    """The events with each step's end moved back to the start of the save that follows it. The
    toolkit sees a step's training end when slime's `perf` line reaches the job's log (Ray's log
    forwarding, then the log copier): on this CPU, and later the busier it is, after the stand-in
    has begun the save (its `save` knob's wait), and the report's split bills all up to that line
    to training (quiet runs read a round's checkpoint 0-1 s of the table's 10, loaded ones up to
    8). A step ends before the save after it starts: a step-done or train-done seen between a
    save's start and the next job's first rollout is placed at the save's start."""
    saves = sorted(float(w["start"]) for w in waits if w["knob"] == save)
    firsts = sorted(when(e) for e in evs if e.get("kind") == "rollout-started")
    out = []
    for e in evs:
        if e.get("kind") in ("step-done", "train-done"):
            t = when(e)
            began = [s for s in saves if s < t]
            if began and not any(began[-1] < f <= t for f in firsts):
                e = {**e, "t": began[-1], **({"since": began[-1]} if "since" in e else {})}
        out.append(e)
    return out


def without(evs: list[dict], dropped: tuple[tuple[float, float], ...]) -> list[dict]:
    """The events outside the dropped intervals."""
    return [e for e in evs if not any(a <= float(e["t"]) < b for a, b in dropped)]


def stage_windows(evs: list[dict], stage: str) -> list[tuple[float, float, object]]:
    """(start, end, round) of each run of `stage` that ended, in wall time."""
    out, open_ = [], {}
    for e in evs:
        if e.get("stage") != stage:
            continue
        if e.get("kind") == "stage-start":
            open_[e.get("round")] = float(e["t"])
        elif e.get("kind") == "stage-end" and e.get("round") in open_:
            out.append((open_.pop(e.get("round")), float(e["t"]), e.get("round")))
    return out


@dataclass(frozen=True)
class Beside:
    """A drain stage and the activity beside it, running at once (wall times; module doc)."""
    start: float    # the earlier of the two starts
    drained: float  # the drain stage's end
    joined: float   # where the beside activity starts waiting for the drain (its join event), else its end


@dataclass(frozen=True)
class Pair:
    """Stages that wait for stand-ins (`drain`: one stage, or a chain run one after the other in a
    round, e.g. export then compile; `knobs`: the stand-ins' waits they are held by) and the
    activity that may run beside them: `beside` gives that activity's (start, end, round) windows
    from the events, `joins` the event after which it waits for the drain (none: from its end),
    `drains` which events are read on the drain's clock inside an overlap (every other on the
    beside activity's): by default the drain stages'."""
    drain: tuple[str, ...]
    knobs: tuple[str, ...]
    beside: Callable[[list[dict]], list[tuple[float, float, object]]]
    joins: Callable[[dict], bool]
    drains: Callable[[dict], bool] | None = None

    def reads_on_the_drain(self, e: dict) -> bool:
        return self.drains(e) if self.drains else e.get("stage") in self.drain


def chain_windows(evs: list[dict], chain: tuple[str, ...]) -> list[tuple[float, float, object]]:
    """Per round, from the first start to the last end of the chain's stages that ran in it."""
    spans: dict[object, tuple[float, float]] = {}
    for stage in chain:
        for a, b, r in stage_windows(evs, stage):
            lo, hi = spans.get(r, (a, b))
            spans[r] = (min(lo, a), max(hi, b))
    return [(a, b, r) for r, (a, b) in spans.items()]


def besides(evs: list[dict], drain: tuple[str, ...], ran: list[tuple[float, float, object]],
            joins: Callable[[dict], bool]) -> list[Beside]:
    """Every run of the `drain` chain that a window of the beside activity (`ran`) of the same round
    overlaps; `joins` tells the event after which the beside activity waits (none: from its end)."""
    out = []
    for a, b, r in chain_windows(evs, drain):
        for s, e, rr in ran:
            if rr == r and s < b and e > a:
                join = [float(x["t"]) for x in evs if x.get("round") == r and s <= float(x["t"]) <= e and joins(x)]
                out.append(Beside(min(a, s), b, join[0] if join else e))
    return out


def timeline(evs: list[dict], waits: list[dict], *, origin: float, dropped: tuple[tuple[float, float], ...] = (),
             inside: tuple[str, str], pairs: list[Pair]) -> list[dict]:
    """The run's events on modelled clocks (module doc): the waits of `inside`'s knob count only
    inside its stage's windows (the analyst's, in compile); where an activity runs beside a
    pair's drain, a clock per activity. An overlap that starts inside an earlier one (of another
    pair) is read on that one's clocks."""
    knob, stage = inside
    waits = within(waits, knob, [(a, b) for a, b, _ in stage_windows(evs, stage)])
    base = clock(waits, origin, dropped)
    found = [(o, p) for p in pairs for o in besides(evs, p.drain, p.beside(evs), p.joins)]
    if not found:
        return events(evs, base)
    clocks = {p: (clock([w for w in waits if w["knob"] in p.knobs], origin, dropped),
                  clock([w for w in waits if w["knob"] not in p.knobs], origin, dropped)) for p in pairs}
    # (the overlap, its pair, its modelled start, its modelled end, its wall end, the shift after it)
    marks: list[tuple[Beside, Pair, float, float, float, float]] = []
    shift = 0.0
    for o, p in sorted(found, key=lambda op: op[0].start):
        if marks and o.start < marks[-1][4]:
            continue
        theirs, mine = clocks[p]
        m0 = base(o.start) + shift
        m1 = m0 + max(theirs(o.drained) - theirs(o.start), mine(o.joined) - mine(o.start))
        end = max(o.drained, o.joined)
        shift = m1 - base(end)
        marks.append((o, p, m0, m1, end, shift))

    def to(e: dict) -> Callable[[float], float]:
        def at(t: float) -> float:
            after = 0.0
            for o, p, m0, m1, end, shifted in marks:
                if t < o.start:
                    break
                if t <= end:  # inside the overlap: on this activity's own clock from its modelled start
                    theirs, mine = clocks[p]
                    if p.reads_on_the_drain(e):
                        return m0 + theirs(min(t, o.drained)) - theirs(o.start)
                    return m0 + mine(t) - mine(o.start) if t <= o.joined else m1  # waiting: until the drain's end
                after = shifted
            return base(t) + after
        return at
    return [_on(e, to(e)) for e in evs]
