"""Where each round's GPU hours went: busy (training steps, evaluation episodes) or idle, phase by
phase -- a pure function of the run's events (events.jsonl; no clock of its own, no file read).

A round's wall time runs from its first stage-start to the next round's first stage-start (the
last round: to its last event), so rounds tile the run and a kill between two rounds is billed to
the round it interrupted. Inside it, each event pair below marks an interval with a phase; every
instant takes the phase of highest priority among the intervals covering it, and what none covers
is `other` (the toolkit's own time: freeing slots, inject, ...). So the phases partition the wall
time exactly -- the report's bars add up to it by construction, and overlapping work (bare val
playing while compile waits, cut 4) is counted once, as the GPUs saw it.

| phase          | busy | from                                   | to                                        |
|----------------|------|----------------------------------------|-------------------------------------------|
| train-steps    | yes  | rollout-started (the plugin's marker)  | that job's last train-done (or step-done) |
| episodes       | yes  | an `episodes` event's t - seconds      | its t                                     |
| server-start   | no   | service-start eval-server              | service-ready eval-server                 |
| job-start      | no   | the job stage's stage-start            | rollout-started (services, submission, Megatron, engines) |
| checkpoint     | no   | the last train-done (or step-done)     | checkpoint-saved (the tracker's mtime)    |
| teardown       | no   | checkpoint-saved                       | the job stage's stage-end                 |
| server-stop    | no   | the last episodes' end                 | the server stage's stage-end              |
| (a stage's own)| no   | a stage billed whole (Roles.whole)     | its stage-end                             |
| restart        | no   | a stage's failure, stop or last sign of life before a kill | the next stage-start |
| other          | no   | whatever no interval above covers      |                                           |

Which stage is which is a stage fact, so this module names none: the caller passes `Roles`, built
by the stage registry (pyhelpers/stages/__init__.py GPU_ROLES, from each stage's GPU_PHASE).

A stage killed with its driver (no stage-end; a later `driver-lost`) ends at its last event.
The step watcher sees a step's rollout end (the plugin's metrics line, `step-done`) and then its
training's end (slime's `perf <id>:` line of train_metric_utils.py, `train-done`: launch/slime_log.py),
so the last step's optimizer update is GPU work; a job whose log lacks the line (an older slime)
bills that update to `checkpoint`, as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

BUSY = ("train-steps", "episodes")
# Highest priority first: an instant covered by several intervals is billed to the first.
PHASES = ("train-steps", "episodes", "server-start", "job-start", "checkpoint", "teardown", "hf-export",
          "server-stop", "compile-wait", "restart", "other")
IDLE = tuple(p for p in PHASES if p not in BUSY)
# RoundTime.row()'s keys, in order: the report's gpu.csv header (report/data.py COLUMNS)
ROW_COLUMNS = ("round", "wall_s", "busy_s", "idle_s", "idle_frac", "finished", *(f"{p}_s" for p in PHASES))
_RANK = {p: i for i, p in enumerate(PHASES)}
JOB, SERVER = "slime-job", "eval-server"  # a stage's GPU_PHASE when its events carry the phases


@dataclass(frozen=True)
class Roles:
    """The stage facts the split needs (the registry builds them: stages.GPU_ROLES)."""
    whole: dict[str, str]  # stage -> the idle phase its whole run is billed to
    job: str               # the stage that runs the slime job (job-start, train-steps, checkpoint, teardown)
    server: str            # the stage that starts the eval server and plays episodes
    end: str               # the stage whose success ends a round
    outside: str           # the stage outside every round (the baseline)

    def __post_init__(self) -> None:
        bad = sorted(p for p in self.whole.values() if p not in IDLE)
        assert not bad, f"GPU_PHASE names no idle phase of gpu_time.PHASES: {bad}"


@dataclass
class RoundTime:
    round: int
    start: float
    end: float
    finished: bool  # the round's inject ended
    seconds: dict[str, float] = field(default_factory=dict)  # phase -> seconds (every phase of PHASES)

    @property
    def wall_s(self) -> float:
        return self.end - self.start

    @property
    def busy_s(self) -> float:
        return sum(self.seconds[p] for p in BUSY)

    @property
    def idle_s(self) -> float:
        return sum(self.seconds[p] for p in IDLE)

    @property
    def idle_frac(self) -> float:
        return self.idle_s / self.wall_s if self.wall_s > 0 else 0.0

    def row(self) -> dict:  # (keys: ROW_COLUMNS)
        return {"round": self.round, "wall_s": round(self.wall_s, 3), "busy_s": round(self.busy_s, 3),
                "idle_s": round(self.idle_s, 3), "idle_frac": round(self.idle_frac, 4), "finished": self.finished,
                **{f"{p}_s": round(self.seconds[p], 3) for p in PHASES}}


def when(e: dict) -> float:
    """An event's boundary time: `since` where the event was noticed after the fact (a marker's or
    the tracker's mtime), else when it was written."""
    s = e.get("since")
    return float(s) if isinstance(s, (int, float)) else float(e["t"])


def _intervals(evs: list[dict], r: int, now: float | None, roles: Roles) -> list[tuple[float, float, str]]:
    """(start, end, phase) of round r, from its events (in file order)."""
    out: list[tuple[float, float, str]] = []
    mine = [e for e in evs if e.get("round") == r]
    last_t = 0.0  # the last sign of life, for a stage its driver died in
    open_: dict[str, dict] = {}  # stage -> its stage-start
    down_since: float | None = None  # a failure/stop/kill: restart until the next stage-start
    rollout: float | None = None  # the current job's first rollout
    steps_end: float | None = None  # its last step-done
    ep_end: float | None = None  # the current evaluate's last episodes end
    server: float | None = None  # eval-server start not yet ready
    ready: float | None = None  # eval-server ready (episodes may be in flight since)

    def close(stage: str, start: dict, end: float) -> None:
        nonlocal rollout, steps_end, ep_end, server, ready
        s = when(start)
        if stage in roles.whole:
            out.append((s, end, roles.whole[stage]))
        elif stage == roles.job:
            out.append((s, rollout if rollout is not None else end, "job-start"))
            if rollout is not None and steps_end is not None:
                out.append((rollout, steps_end, "train-steps"))
            rollout = steps_end = None
        elif stage == roles.server:
            if ep_end is not None:
                out.append((ep_end, end, "server-stop"))
            if server is not None:
                out.append((server, end, "server-start"))
            ep_end = server = ready = None

    for e in mine:
        k, t = e.get("kind"), when(e)
        if k == "stage-start":
            if down_since is not None:
                out.append((down_since, t, "restart"))
                down_since = None
            if e.get("stage") in open_:  # started again without an end: the earlier run was lost
                close(e["stage"], open_.pop(e["stage"]), last_t)
            open_[e["stage"]] = e
        elif k == "stage-end" and e.get("stage") in open_:
            close(e["stage"], open_.pop(e["stage"]), t)
            if e.get("status") not in (0, None):
                down_since = t
        elif k == "driver-lost":
            for stage, start in list(open_.items()):
                close(stage, start, last_t)
            open_.clear()
            down_since = last_t
            continue  # written by the next driver: not a sign of the lost one's life
        elif k == "run-restart" and down_since is None:
            down_since = t
        elif k == "rollout-started" and rollout is None:
            rollout = t
        elif k in ("step-done", "train-done"):  # a rollout's end, then its training's (slime's log)
            steps_end = t if steps_end is None else max(steps_end, t)
        elif k == "checkpoint-saved":
            if steps_end is not None:
                out.append((steps_end, t, "checkpoint"))
            out.append((t, _end_of(mine, roles.job, after=e["t"], default=now), "teardown"))
        elif k == "episodes" and isinstance(e.get("seconds"), (int, float)):
            out.append((t - float(e["seconds"]), t, "episodes"))
            ep_end = t
        elif k == "service-start" and e.get("service") == "eval-server":
            server = t
        elif k == "service-ready" and e.get("service") == "eval-server" and server is not None:
            out.append((server, t, "server-start"))
            server, ready = None, t
        last_t = max(last_t, t)
    if now is not None:  # while it runs (make status): steps and episodes in flight are busy
        if roles.job in open_ and rollout is not None:
            out.append((rollout, now, "train-steps"))
        if roles.server in open_ and ready is not None:
            out.append((max(ready, ep_end or ready), now, "episodes"))
    for stage, start in open_.items():  # still running (now given) or killed with nothing after yet
        close(stage, start, now if now is not None else last_t)
    if down_since is not None and now is not None:
        out.append((down_since, now, "restart"))
    return [(a, b, p) for a, b, p in out if b > a]


def _end_of(mine: list[dict], stage: str, after: float, default: float | None) -> float:
    for e in mine:
        if e.get("kind") == "stage-end" and e.get("stage") == stage and e["t"] >= after:
            return float(e["t"])
    return default if default is not None else after


def _sweep(ivals: list[tuple[float, float, str]], start: float, end: float) -> dict[str, float]:
    """Seconds per phase over [start, end): each elementary segment goes to its top-priority phase."""
    secs = {p: 0.0 for p in PHASES}
    cuts = sorted({start, end, *(x for a, b, _ in ivals for x in (a, b) if start < x < end)})
    for a, b in zip(cuts, cuts[1:], strict=False):
        mid = (a + b) / 2
        live = [p for s, e, p in ivals if s <= mid < e]
        secs[min(live, key=_RANK.__getitem__) if live else "other"] += b - a
    return secs


def split(evs: list[dict], roles: Roles, now: float | None = None) -> list[RoundTime]:
    """Every round that has started: its wall time split into phases (see the module doc). `now`
    (make status) extends what is still running to now; without it a round ends at its last event."""
    starts: dict[int, float] = {}
    for e in evs:
        r = e.get("round")
        if e.get("kind") == "stage-start" and isinstance(r, int) and e.get("stage") != roles.outside:
            starts.setdefault(r, when(e))
    out = []
    order = sorted(starts)
    for i, r in enumerate(order):
        mine = [e for e in evs if e.get("round") == r]
        finished = any(e.get("kind") == "stage-end" and e.get("stage") == roles.end and e.get("status") == 0
                       for e in mine)
        if i + 1 < len(order):
            end = starts[order[i + 1]]
        elif now is not None and not finished:
            end = now
        else:
            end = max(when(e) for e in mine)
        ivals = _intervals(evs, r, None if finished else now, roles)
        rt = RoundTime(r, starts[r], end, finished)
        rt.seconds = _sweep(ivals, rt.start, rt.end)
        out.append(rt)
    return out


def run_idle_frac(rounds: list[RoundTime]) -> float:
    """Idle seconds over wall seconds across the given rounds (0 when none)."""
    wall = sum(x.wall_s for x in rounds)
    return sum(x.idle_s for x in rounds) / wall if wall > 0 else 0.0


def phase_now(evs: list[dict], roles: Roles, now: float) -> tuple[int, str] | None:
    """(round, phase) the GPUs are in at `now` while a round runs; None before any round."""
    rounds = split(evs, roles, now=now)
    if not rounds:
        return None
    cur = rounds[-1]
    ivals = _intervals(evs, cur.round, now, roles)
    live = [p for s, e, p in ivals if s <= now - 1e-6 < e]
    return cur.round, (min(live, key=_RANK.__getitem__) if live else "other")
