"""The train stage of round r, in one process (architecture §4; M1, M6-M8, M10, M11, M15).

1. the round's slime.yaml (round 0's bank from SEED_BANK or empty), the disk guard;
2. ShopSimulator and the Ray head up (both stay up for later rounds; the driver stops them at the
   end), every simulator slot freed before the job starts (a killed job leaves the slots it held
   taken), a watchdog thread that restarts a ShopSimulator dying mid-round (SHOPSIM_MAX_RESTARTS;
   beyond that the job is stopped and the stage fails, saying why);
3. the Failure Analyst sidecar started beside training (its failures never stop training);
4. the slime job submitted (pyhelpers.launch.rayjob, recorded submission id), its output copied into
   logs/slime-log.log, watched with the placement deadline JOB_START_TIMEOUT;
5. at the end: the analyst stopped, and its drain started in a thread of the loop, beside the
   export; compile waits for it (analyst/drain.py).
While the job trains, a thread also loads the eval prompt builder (evaluate/builders.py), which
the loop is otherwise idle enough to do: the round transition then does not wait for it.

On Stopped (make stop, Ctrl-C: pyhelpers/loop/loop.py) or a failure, the job (launch/slime_job.py),
the analyst and the log copy are stopped here; the driver stops the rest.
"""

from __future__ import annotations

import json
import shlex
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from pyhelpers.analyst import drain
from pyhelpers.capacity import diskguard
from pyhelpers.config.load import Config
from pyhelpers.errors import ToolkitError
from pyhelpers.evaluate.builders import builder_for
from pyhelpers.jsonfiles import load_json_or_none
from pyhelpers.launch import cluster, ray_lost, rayjob, secret_env, services, slime_args, slime_job
from pyhelpers.procs import groups, procfs
from pyhelpers.rollout.settings import plugin_values, write_plugin_yaml
from pyhelpers.run import checkpoints, events, gpu_time
from pyhelpers.run.layout import RunLayout
from pyhelpers.run.records import write_record
from pyhelpers.skills import bank
from pyhelpers.skills.tokens import counter_for
from pyhelpers.stages import inputs, one_job, stepwatch
from pyhelpers.tasks.files import check_slime_prompts

if TYPE_CHECKING:
    from pyhelpers.stages.context import StageContext

LOG = stepwatch.SLIME_LOG  # the slime job's output, copied from Ray's driver log
COLOUR = "#1565c0"
GPU_PHASE = gpu_time.JOB  # run/gpu_time.py: its events mark job-start, train-steps, checkpoint, teardown
STEPPED = True
WRITES = diskguard.checkpoint_writes


def reads(lay: RunLayout, r: int, seed_bank: Path | None) -> list[inputs.RunInput]:
    return inputs.bank_and_analyst(lay, r, seed_bank, new_run_reads_seed=True)


def launches(cfg: Config, lay: RunLayout, r: int, model_args: list[str]) -> list[tuple[str, str, str]]:
    multi = cfg.multinode
    out = [services.plan_line(cfg, lay, "shopsim"),
           *([services.plan_line(cfg, lay, "shopsim-gate", "the simulator for the other nodes: NODE_ADDR, "
                                 "the run's token")] if multi else []),
           services.plan_line(cfg, lay, "ray-head"),
           *([cluster.worker_plan_line(cfg)] if multi else []),
           ("slime job", job_entrypoint(cfg, lay, r=r, model_args=model_args, one_job=bool(cfg.ONE_JOB)),
            f"{'every round from this one on (ONE_JOB=1), ' if cfg.ONE_JOB else ''}"
            f"through the Ray job API as {cfg.run_name}-r{r:03d}-<time>; runtime env "
            f"{json.dumps(slime_args.runtime_env(cfg, secret_env.job_netrc_entry(cfg, lay.run_dir)), sort_keys=True)};"
            f" MODEL_ARGS from {cfg.MODEL_ARGS_SCRIPT}")]
    if cfg.ANALYST_ENABLED:
        out.append(("analyst", shlex.join(analyst_argv(lay, r)),
                    f"its model: {cfg.ANALYST_MODEL} at {cfg.ANALYST_BASE_URL}"))
    return out


def done(lay: RunLayout, r: int, rounds: int) -> tuple[bool, str]:
    tracked = checkpoints.read_tracker(lay.megatron)
    want = lay.last_iteration(r)
    if tracked is None:
        return False, f"no checkpoint yet; round {r} trains iterations {want - lay.steps_per_round + 1}..{want}"
    if tracked < want:
        return False, f"checkpoint at iteration {tracked}; round {r} continues to {want}"
    path = checkpoints.iter_dirs(lay.megatron).get(tracked)
    if path is None or not checkpoints.is_complete(path):
        return False, f"tracker names iteration {tracked} but iter_{tracked:07d} is missing or incomplete"
    return True, f"trained through iteration {tracked}"


def prepare(loop: StageContext, r: int, job_runs: bool = False) -> None:
    cfg, lay, echo = loop.cfg, loop.lay, loop.echo
    check_slime_prompts(cfg.TRAIN_TASKS)  # slime would stop on it only after placement
    for d in (lay.spool(r), lay.candidates(r), lay.stage_record(r, "train").parent):
        d.mkdir(parents=True, exist_ok=True)
    if r == 0 and not lay.bank_in(0).is_file():
        if cfg.SEED_BANK:
            seed = bank.load_bank(cfg.SEED_BANK)
            bank.write_bank(lay.bank_in(0), {**seed, "round": 0})
        else:
            hf = cfg.HF_MODEL
            name, count = counter_for(hf if hf.is_dir() else None)
            bank.write_bank(lay.bank_in(0), bank.empty_bank(0, name, bank.header_tokens(count)))
    write_plugin_yaml(lay.plugin_config(r), **plugin_values(cfg, lay, r))
    echo("disk: " + diskguard.check(cfg, lay, "train", WRITES).explain())
    gap = checkpoints.data_state_gap(lay.megatron)  # a save cut between its tracker and its data state
    if gap:
        echo(f"checkpoint: {gap}")
    if not job_runs:  # (a job that trains on writes this round's marker itself, maybe already)
        lay.started_marker(r).unlink(missing_ok=True)


def _wait_for_old_plugin(lay: RunLayout, r: int, timeout: float, echo: Callable[[str], None]) -> None:
    """Wait (bounded) until the process an earlier job's plugin ran in has exited: Ray kills the
    RolloutManager actor only after the job's driver is gone, and until then it may take a slot."""
    for rr in (r - 1, r):
        rec = load_json_or_none(lay.round(rr).plugin_process) if rr >= 0 else None
        if not isinstance(rec, dict) or not isinstance(rec.get("pid"), int):
            continue
        if rec.get("boot_id") and rec["boot_id"] != procfs.boot_id():
            continue  # it ran on another node (multi-node): Ray ends it with the job; its pid is not ours
        deadline = time.monotonic() + timeout
        while procfs.is_alive(rec["pid"], rec.get("ticks")) and time.monotonic() < deadline:
            time.sleep(0.2)
        if procfs.is_alive(rec["pid"], rec.get("ticks")):
            echo(f"WARNING: the rollout actor of an earlier job (pid {rec['pid']}) is still running after "
                 f"{timeout:g} s; freeing the ShopSimulator slots anyway")


def job_entrypoint(cfg: Config, lay: RunLayout, r: int, model_args: list[str], one_job: bool = False) -> str:
    """The slime job's entry point for round r, as submitted (and as `make plan` shows it)."""
    return slime_args.slime_entrypoint(cfg, model_args, slime_args.job_flags(cfg, lay, r, one_job=one_job))


def submit(cfg: Config, lay: RunLayout, r: int, model_args: list[str]) -> str:
    one = bool(cfg.ONE_JOB)  # the one-job mode's job: every round from r on (stages/one_job.py)
    entry = job_entrypoint(cfg, lay, r=r, model_args=model_args, one_job=one)
    job_id = f"{cfg.run_name}-r{r:03d}-{int(time.time())}"
    port = cfg.RAY_DASHBOARD_PORT
    # The head answered within RAY_START_TIMEOUT; its job agent may need part of that again.
    runtime_env = slime_args.runtime_env(cfg, secret_env.job_netrc(cfg, lay.run_dir))
    rayjob.JobApi(port, lay.run_dir).submit(job_id, entry, runtime_env,
                                            agent_wait=cfg.RAY_START_TIMEOUT,
                                            head_up=lambda: ray_lost.why_lost(cfg, lay) is None)
    source = rayjob.driver_log(cfg.ray_temp_dir, job_id)
    rayjob.record_job(lay.run_dir, submission_id=job_id, round_=r, dashboard_port=port, log=str(source), one_job=one)
    events.append(lay.run_dir, "job-submitted", round=r, job_id=job_id,
                  num_rollout=lay.num_rollout(cfg.ROUNDS - 1 if one else r))
    groups.start("slime-log", ["tail", "-n", "+1", "-s", "0.2", "-F", str(source)], pids_dir=lay.pids, logs_dir=lay.logs)
    return job_id


def watch(loop: StageContext, r: int, job_id: str, trains_on: bool = False) -> rayjob.JobOutcome:
    """Until the job ends; in the one-job mode (ONE_JOB=1) until round r's checkpoint is saved while
    the job goes on (ROUND_SAVED: `job-round-saved`, not `job-end`). trains_on: the job was
    submitted in an earlier round, so it started training long ago."""
    cfg, lay, echo = loop.cfg, loop.lay, loop.echo
    api = rayjob.JobApi(cfg.RAY_DASHBOARD_PORT, lay.run_dir)
    started = (lambda: True) if trains_on else rayjob.marker_started(lay.started_marker(r))
    outcome = rayjob.watch(job_id, info=api.info, stop=api.stop, started=started,
                           start_timeout=cfg.JOB_START_TIMEOUT, unreachable_timeout=cfg.RAY_UNREACHABLE_TIMEOUT,
                           head_lost=lambda: ray_lost.why_lost(cfg, lay), progress=echo,
                           until=(lambda: done(lay, r, cfg.ROUNDS)[0]) if cfg.ONE_JOB else (lambda: False))
    _note_checkpoint(lay, r)
    if outcome.status == rayjob.ROUND_SAVED:
        events.append(lay.run_dir, "job-round-saved", round=r, job_id=job_id)
        return outcome
    events.append(lay.run_dir, "job-end", round=r, job_id=job_id, status=outcome.status,
                  exit_code=outcome.exit_code)
    _await_log_copy(lay, rayjob.driver_log(cfg.ray_temp_dir, job_id))
    return outcome


COPY_WAIT_S = 30.0  # a guard on a stuck copier only: the copy catches up within milliseconds


def _await_log_copy(lay: RunLayout, source: Path, wait_s: float = COPY_WAIT_S) -> None:
    """Wait until logs/slime-log.log ends as the job's own log (Ray's driver log) does, or until
    its copier is gone: the job's last lines -- a crash's error -- are what the restart rules, the
    stage's error and the step watcher read, and the copier is stopped next. (A fixed 0.2 s here
    lost them whenever a loaded machine ran the copier later than that.)"""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and services.alive(lay, "slime-log"):
        end = _last_bytes(source, 4096)
        if not end or _last_bytes(lay.logs / LOG, len(end)) == end:
            return
        time.sleep(0.05)


def _last_bytes(path: Path, n: int) -> bytes:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - n))
            return fh.read()
    except OSError:
        return b""


def _note_checkpoint(lay: RunLayout, r: int) -> None:
    """When the round's final save completed (Megatron writes the tracker once the iteration's
    files are in place): the end of the GPUs' save and the start of the job's teardown
    (pyhelpers/run/gpu_time.py). Read after the job ended, from the tracker's mtime."""
    tracker = lay.megatron / checkpoints.TRACKER
    if checkpoints.read_tracker(lay.megatron) == lay.last_iteration(r) and tracker.is_file():
        events.append(lay.run_dir, "checkpoint-saved", round=r, iteration=lay.last_iteration(r),
                      since=round(tracker.stat().st_mtime, 3))


def analyst_argv(lay: RunLayout, r: int) -> list[str]:
    """The analyst sidecar watching the round's spool/ while the job trains (W&B live)."""
    return [sys.executable, "-m", "pyhelpers", "analyst", "run", "--round-dir", str(lay.round_dir(r)), "--wandb"]


def _disk_watch(cfg: Config, lay: RunLayout, r: int, stopped: Callable[[float], bool], warn: Callable[[str], None],
                note: Callable[[str], None] = lambda _text: None) -> None:
    """While the job trains: warn once when free space falls below what the round's final save
    needs (the guard acts only at stage boundaries: Megatron saves inside the job). A read of the
    free space that fails (a stale NFS handle, a disk going away) skips that check, noted once: the
    thread dying of it would leave the rest of the round unwatched, silently."""
    interval = cfg.DISK_WATCH_INTERVAL
    base = diskguard.need(cfg, lay, "train", WRITES)  # sizes are fixed within a round: only free space moves
    failed = False
    while not stopped(interval):
        try:
            free = diskguard.free_bytes(base.where)
        except (OSError, ValueError) as exc:
            if not failed:
                note(f"disk watch: could not read the free space on {base.where} ({exc}); "
                     f"trying again every {interval:g} s")
            failed = True
            continue
        n = replace(base, free=free)
        if not n.fits:
            text = f"disk low during round {r}: {n.explain()}; the round's final save may fail: free space on it now"
            events.append(lay.run_dir, "disk-low", round=r, free=n.free, need=n.total)
            warn(text)
            return


def run(loop: StageContext, r: int) -> None:
    cfg, lay, echo = loop.cfg, loop.lay, loop.echo

    def warn(text: str) -> None:
        loop.notifier.send("disk-low", text, round=r)

    running = one_job.running_job(cfg, lay)  # the one-job mode's job, submitted in an earlier round
    prepare(loop, r, job_runs=running is not None)
    echo(services.ensure(cfg, lay, "shopsim", round_=r, progress=echo))
    if cfg.multinode:  # the plugin may run on a worker: it reaches the simulator through the gate
        echo(services.ensure(cfg, lay, "shopsim-gate", round_=r, progress=echo))
    if running is None:  # (a job that trains on holds its slots: they are its episodes')
        # slime runs the plugin inside its RolloutManager actor, which Ray kills only once an earlier
        # job's driver is gone: wait for that process before freeing the slots it may still take.
        _wait_for_old_plugin(lay, r, timeout=cfg.STOP_GRACE + 30.0, echo=echo)
        echo(f"ShopSimulator: {services.free_all_slots(cfg, lay, stage='train', round_=r)}")  # a killed job's too
    echo(services.ensure(cfg, lay, "ray-head", round_=r, progress=echo))
    if cfg.multinode:  # the workers joined, with the head's versions and its storage (docs/multinode.md §4)
        cluster.head_ready(cfg, lay, echo)
    stop, gave_up = threading.Event(), []

    def give_up(reason: str) -> None:
        gave_up.append(reason)
        echo(reason)
        echo(slime_job.stop(cfg, lay))

    def disk_warning(text: str) -> None:
        echo(f"WARNING: {text}")
        warn(text)

    threading.Thread(target=_disk_watch, daemon=True, name="disk-watch",
                     args=(cfg, lay, r, stop.wait, disk_warning, echo)).start()
    steps = threading.Thread(target=stepwatch.watch, daemon=True, name="step-watch",
                             args=(cfg, lay, r, stop.wait, echo, lambda evs, k: loop.eta(evs, r, "train", k), loop.status))
    steps.start()
    analyst = cfg.ANALYST_ENABLED
    ok = trains_on = False
    try:
        with services.shopsim_watched(cfg, lay, r, on_give_up=give_up, progress=echo):
            if analyst:
                groups.start("analyst", analyst_argv(lay, r), pids_dir=lay.pids, logs_dir=lay.logs,
                            env=secret_env.for_user(cfg, "analyst"))
            if running is None:
                job_id = submit(cfg, lay, r=r, model_args=loop.model_args)
                last = lay.last_iteration(cfg.ROUNDS - 1 if cfg.ONE_JOB else r)
                echo(f"slime job {job_id} submitted: rollouts {r * lay.steps_per_round}..{last} "
                     f"(output: logs/slime-log.log)")
            else:
                job_id = running["submission_id"]
                echo(f"slime job {job_id} trains on: round {r}, rollouts {r * lay.steps_per_round}.."
                     f"{lay.last_iteration(r)} (ONE_JOB=1; output: logs/slime-log.log)")
            _warm_eval_builder(loop)
            outcome = watch(loop, r, job_id, trains_on=running is not None)
            if not outcome.ok:
                tail = "\n".join(groups.log_tail(lay.logs / "slime-log.log", 30))
                echo(f"--- last lines of the slime job ({lay.logs / 'slime-log.log'}) ---\n{tail}\n---")
                why = f"; {gave_up[0]}" if gave_up else ""
                raise ToolkitError(f"slime job {job_id} {outcome.status} (exit code {outcome.exit_code}): "
                                   f"{outcome.message.splitlines()[0] if outcome.message else ''}{why}",
                                   f"round {r}; full log: {lay.logs / 'slime-log.log'}",
                                   "fix the cause shown above, then `make resume` (training continues from the newest "
                                   "checkpoint)")
            ok = True
            trains_on = outcome.status == rayjob.ROUND_SAVED
            echo(f"slime job {job_id}: round {r} saved; it evaluates the round and trains on" if trains_on
                 else f"slime job {job_id} succeeded")
    finally:
        stop.set()
        steps.join(timeout=5)  # its last step's line comes before the stage's end
        if not ok:
            echo(slime_job.stop(cfg, lay))
        for line in services.stop(cfg, lay, *(("analyst",) if trains_on else ("slime-log", "analyst"))):
            echo(line)
        if not trains_on:
            secret_env.remove_job_netrc(lay.run_dir)  # the job is over (or stopped): its key goes
    if analyst:  # the drain runs beside the export; compile waits for it
        drain.start(cfg, lay, r, echo)
    write_record(lay, r, "train")


def _warm_eval_builder(loop: StageContext) -> None:
    def warm():
        try:
            builder_for(str(loop.cfg.HF_MODEL))
        except Exception:  # noqa: BLE001 - only a head start; the evaluate stage loads it if this failed
            pass
    threading.Thread(target=warm, daemon=True, name="warm-eval-builder").start()
