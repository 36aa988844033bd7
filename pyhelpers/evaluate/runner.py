"""Play a list of episodes with EVAL_CONCURRENCY in flight, resumable by episode id.

    result = asyncio.run(run_episodes(specs, settings, builder, out_dir, resume=True, label="val"))

- In flight: settings.in_flight = min(EVAL_CONCURRENCY, SHOPSIM_SLOTS) workers, each taking the
  next unplayed episode as soon as its last one ends (the benchmark checks this keeps throughput
  at concurrency / mean latency); the ShopSimClient's own slot cap is SHOPSIM_SLOTS as well.
- `<out_dir>/episodes.jsonl` gets one fsynced line per finished episode, written by one writer
  task in a thread so that fsync never stalls the event loop; the line is the resume state.
- `--resume`: the torn last line of a killed run is dropped, episodes recorded as infra_error are
  removed from the file and played again (so every episode is in the file exactly once), the slot
  ledger's leftovers are released (slots.clean_up), and finished episodes are skipped. Without
  --resume an existing non-empty episodes.jsonl is refused.
- The ledger is cleaned up again at the end, also when an error (a TaskError) stopped the run:
  the other episodes are cancelled, their releases awaited, then what the ledger says may still
  be taken is freed. Both clean-ups are in RunResult.slot_cleanup ({"start", "end"}).
- One runner per directory (an flock on `<out_dir>/.lock`).
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pyhelpers.errors import ToolkitError
from pyhelpers.evaluate import records, slots
from pyhelpers.evaluate.episode import Context, EpisodeSpec, play
from pyhelpers.evaluate.progress import Progress
from pyhelpers.evaluate.settings import EvalSettings
from pyhelpers.policy.prompt_builder import PromptBuilder
from pyhelpers.run import events

START_WAIT_S = 30.0  # how long the runner waits for both services before it starts
NO_CLEANUP = {"released": [], "release_all": False}
log = logging.getLogger(__name__)


@dataclass
class RunResult:
    records: dict[str, dict]   # episode id -> record, for every planned episode
    played: int                # episodes played by this invocation
    resumed: int               # episodes found finished in episodes.jsonl
    replayed_infra: int        # infra_error episodes of an earlier run played again
    slot_cleanup: dict         # what slots.clean_up released: {"start": ..., "end": ...}
    timing: dict               # wall-clock figures (timing.json; never in a summary)


class DirLock:
    """An exclusive flock on <dir>/.lock for the runner's lifetime (released when the process dies)."""

    def __init__(self, directory: Path):
        self.path = Path(directory) / ".lock"

    def __enter__(self) -> DirLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise ToolkitError("another evaluation is running in this directory", str(self.path.parent),
                               "wait for it to finish, or stop it first") from None
        return self

    def __exit__(self, *exc) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)


def record_episodes(run_dir: Path, what: str, round_no: int | None, result: RunResult) -> None:
    """How long the episodes took, for events.jsonl (the round-overhead benchmark subtracts it:
    episodes are the policy's time, not the toolkit's); nothing outside a run's directory."""
    if Path(run_dir).is_dir():
        events.append(Path(run_dir), "episodes", what=what, round=round_no, played=result.played,
                      seconds=round(result.timing["wall_s"], 3))


def load_finished(out_dir: Path, specs: Sequence[EpisodeSpec], *, resume: bool) -> tuple[dict[str, dict], int]:
    """Finished episodes of an earlier run ({id: record}) and how many infra_error ones were dropped."""
    path = Path(out_dir) / "episodes.jsonl"
    if not resume and path.exists() and path.stat().st_size:
        raise ToolkitError("episodes.jsonl already has episodes", str(path),
                           "pass --resume to continue that run, or delete the directory to start over")
    recs = records.repair(path)
    planned = {s.id for s in specs}
    unknown = sorted({r["id"] for r in recs} - planned)
    if unknown:
        raise ToolkitError(f"{len(unknown)} recorded episodes are not in this run's plan (e.g. {unknown[0]})",
                           str(path), "the tasks or the plan changed since; use a fresh directory")
    kept: dict[str, dict] = {}
    for r in recs:
        if r["termination"] != "infra_error":
            kept.setdefault(r["id"], r)
    dropped = len(recs) - len(kept)
    if dropped:
        records.rewrite(path, [r for r in recs if r["termination"] != "infra_error" and kept[r["id"]] is r])
    return kept, dropped


async def _check_up(ctx: Context) -> None:
    s = ctx.settings
    if not await ctx.shopsim_up():
        deadline = time.monotonic() + START_WAIT_S
        while not await ctx.shopsim_up():
            if time.monotonic() > deadline:
                raise ToolkitError("ShopSimulator does not answer", s.shopsim_url,
                                   "start it (the evaluate stage does), or pass --shopsim URL")
            await asyncio.sleep(0.5)
    deadline = time.monotonic() + START_WAIT_S
    while not await ctx.server.health():
        if time.monotonic() > deadline:
            raise ToolkitError("the SGLang eval server does not answer /health", s.server_url,
                               "start it (the evaluate stage does), or pass --server URL")
        await asyncio.sleep(0.5)


async def run_episodes(specs: Sequence[EpisodeSpec], settings: EvalSettings, builder: PromptBuilder,
                       out_dir: Path, *, resume: bool, label: str, progress=None) -> RunResult:
    """Play every spec not yet in out_dir/episodes.jsonl. progress: a text stream for the progress
    line (None: no progress line)."""
    out_dir = Path(out_dir)
    with DirLock(out_dir):
        finished, dropped = load_finished(out_dir, specs, resume=resume)
        todo = [s for s in specs if s.id not in finished]
        ledger_path = out_dir / "slots.jsonl"
        if not todo and slots.outstanding(ledger_path) == ([], 0):  # a finished run: touch nothing
            return RunResult(records=finished, played=0, resumed=len(finished), replayed_infra=dropped,
                             slot_cleanup={"start": NO_CLEANUP, "end": NO_CLEANUP}, timing=_timing([], 0.0, 0))
        ctx = Context(settings, builder)
        try:
            await _check_up(ctx)
            cleanup = await slots.clean_up(ledger_path, ctx.shopsim)
            ledger = ctx.hooks = slots.SlotLedger(ledger_path)
            t0 = time.monotonic()
            try:
                played = await _play_all(ctx, todo, path=out_dir / "episodes.jsonl",
                                         progress=Progress(label, len(specs), already=len(finished), stream=progress,
                                                  enabled=progress is not None))
            except Exception:
                ledger.close()
                await _clean_up_after_error(ledger_path, ctx)
                raise
            finally:
                ledger.close()
            wall = time.monotonic() - t0
            end = await slots.clean_up(ledger_path, ctx.shopsim)
        finally:
            await ctx.aclose()
    all_recs = {**finished, **{r["id"]: r for r in played}}
    return RunResult(records=all_recs, played=len(played), resumed=len(finished), replayed_infra=dropped,
                     slot_cleanup={"start": cleanup, "end": end}, timing=_timing(played, wall, settings.in_flight))


async def _clean_up_after_error(ledger_path: Path, ctx: Context) -> None:
    """Free the slots of a run an error stopped, once the cancelled episodes' releases are done.
    The error that stopped the run is what gets reported: a failing clean-up is only logged (the
    ledger keeps its lines, so `--resume` frees them)."""
    await ctx.shopsim.drain()
    try:
        await slots.clean_up(ledger_path, ctx.shopsim)
    except Exception as exc:  # noqa: BLE001 - never hide the error that stopped the run
        log.warning("slots of the stopped run not freed: %s", exc)


async def _play_all(ctx: Context, todo: list[EpisodeSpec], path: Path, progress: Progress) -> list[dict]:
    """Workers take specs in order; a writer task appends each record (fsync in a thread)."""
    queue: asyncio.Queue = asyncio.Queue()
    played: list[dict] = []
    appender = records.Appender(path)
    it = iter(todo)

    async def worker() -> None:
        for spec in it:  # one shared iterator: the next episode goes to the first free worker
            queue.put_nowait(await play(ctx, spec))

    async def writer() -> None:
        while True:
            rec = await queue.get()
            if rec is None:
                return
            await asyncio.to_thread(appender.append, rec)
            played.append(rec)
            progress.add(rec)

    write_task = asyncio.create_task(writer())
    workers = [asyncio.create_task(worker()) for _ in range(min(ctx.settings.in_flight, len(todo)))]
    try:
        await asyncio.gather(*workers)
    except BaseException:  # one worker failed (a TaskError): stop the others before cleaning up
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        raise
    finally:
        queue.put_nowait(None)
        await write_task
        appender.close()
        progress.close()
    return played


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def _timing(played: list[dict], wall: float, in_flight: int) -> dict:
    lat = [r["timing"]["episode_s"] for r in played]
    mean = _mean(lat)
    rate = len(played) / wall if wall > 0 else None
    bound = in_flight / mean if mean else None
    return {"played": len(played), "wall_s": round(wall, 3), "in_flight": in_flight,
            "episodes_per_s": round(rate, 4) if rate else None, "episode_s_mean": mean,
            "episode_s_max": round(max(lat), 4) if lat else None,
            "generate_s_mean": _mean([r["timing"]["generate_s"] for r in played]),
            "interact_s_mean": _mean([r["timing"]["interact_s"] for r in played]),
            "slot_wait_s_mean": _mean([r["timing"]["slot_wait_s"] for r in played]),
            "retry_wait_s_total": round(sum(r["timing"]["retry_wait_s"] for r in played), 3),
            "concurrency_bound_per_s": round(bound, 4) if bound else None,
            "ratio_to_bound": round(rate / bound, 4) if rate and bound else None}
