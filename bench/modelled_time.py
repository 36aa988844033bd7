"""A rehearsal's timeline in modelled seconds: each stand-in's wait (tests/fakes/modelled_wait.py's
records) counts the real seconds it models, the rest -- the toolkit's own time, Ray's and
Python's starts on this CPU -- counts as it was, unscaled. A bench that multiplied the whole wall
time back by its scale multiplied this CPU's time too, and its verdict moved with the machine's
load; read this way, load moves only the unscaled part, by what it really costs.

The clock is piecewise linear: an instant covered by at least one wait runs at that wait's
modelled/waited rate (the largest where several overlap: the stand-ins share one scale, so they
agree up to a sleep's overrun), every other instant at 1. Overlapping waits (an analyst answer
during a training step, a server's many /generate calls) are so stretched once, not added.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable
from pathlib import Path


def read_waits(path: Path) -> list[dict]:
    """The wait records of one run (FAKE_WAIT_LOG); none when no stand-in waited."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def clock(waits: list[dict], origin: float) -> Callable[[float], float]:
    """A function from a wall time (time.time()) to modelled seconds since `origin`."""
    cuts = sorted({origin, *(float(w[k]) for w in waits for k in ("start", "end"))})
    rates = []  # the rate over [cuts[i], cuts[i + 1])
    for a, b in zip(cuts, cuts[1:], strict=False):
        mid = (a + b) / 2
        live = [float(w["modelled_s"]) / (float(w["end"]) - float(w["start"])) for w in waits
                if float(w["start"]) <= mid < float(w["end"]) and float(w["end"]) > float(w["start"])]
        rates.append(max(live, default=1.0))
    at = [0.0]  # modelled seconds since cuts[0] at each cut
    for (a, b), r in zip(zip(cuts, cuts[1:], strict=False), rates, strict=True):
        at.append(at[-1] + (b - a) * r)
    base = at[cuts.index(origin)]

    def to(t: float) -> float:
        i = bisect.bisect_right(cuts, t) - 1
        if i < 0:  # before every cut: as it was
            return t - origin
        rate = rates[i] if i < len(rates) else 1.0
        return at[i] + (t - cuts[i]) * rate - base
    return to


def events(evs: list[dict], to: Callable[[float], float]) -> list[dict]:
    """The run's events with their times (t, and since where noticed after the fact) on the modelled clock."""
    out = []
    for e in evs:
        e = dict(e)
        for key in ("t", "since"):
            if isinstance(e.get(key), (int, float)):
                e[key] = to(float(e[key]))
        out.append(e)
    return out


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
