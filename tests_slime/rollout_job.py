"""slime's real train.py in rollout-only mode on the plan's argv, run three times for the whole lane (issues 42, 44).

`--debug-rollout-only` (slime/utils/arguments.py:1919-1931 at 624b824; the Megatron actor returns
from init at once, backends/megatron_utils/actor.py:67) with two external stand-in engines
(`--rollout-external-engine-addrs`, arguments.py:1904-1907, backends/sglang_utils/external.py)
behind slime's real sglang_router, the stand-in ShopSimulator and the rehearsal's world (its
tokenizer, fake policy and task files: tests/fakes/rehearsal.py build), on a Ray head of the
lane's own with fake GPUs.

1. FIRST rollouts (0..FIRST-1), each one's samples saved by `--save-debug-rollout-data`.
2. A resume: the same argv with `--start-rollout-id FIRST --num-rollout FIRST + RESUMED` on the same
   Ray head and engines. The job's YAML is round 0's and STEPS_PER_ROUND is FIRST, so from here
   on the job goes past its round as the one-job mode's does: the plugin trains rollouts FIRST..
   in round 1's directory with round 1's bank, which it waits for (rollout/bank_wait.py) until
   written here, as inject would, once the run's events say it waits. slime then loads the data source's state of step FIRST-1
   (ray/placement_group.py:218-222 -> RolloutManager.load, ray/rollout.py:533-534 ->
   RolloutDataSource.load, rollout/data_source.py:138-160) from `--load`. parse_args keeps `--load`
   only when it holds Megatron's tracker (arguments.py:1817-1831; otherwise --load becomes
   --ref-load and the data source starts at the first task again); rollout-only mode never saves
   Megatron (actor.py:572-573), so the tracker a real save writes last is written here in its place.
3. The rollout that ends round 1 (STEPS_PER_ROUND=2: rollout FIRST + RESUMED), resumed the
   same way, without --save-debug-rollout-data and with the one-job mode's eval flags, round 1's
   compiled.json written first (one candidate skill): slime's train.py calls the toolkit's eval hook
   (rollout/in_job_eval.py) after it (train.py:90-91), which plays val, then the gate.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from plan import plan_argv

from pyhelpers.rollout import flags as plugin
from pyhelpers.run import checkpoints
from pyhelpers.run.layout import RoundFiles, RunLayout, from_config
from pyhelpers.skills.bank import empty_bank, write_bank

HERE = Path(__file__).resolve().parent
FIRST = 2     # rollouts of the first invocation
RESUMED = 1   # rollouts of the resumed one
ENGINES = 2
COMPILED_SKILL = ("选项不止一个时", "先点开选项核对颜色和尺码，再点购买。")  # (trigger, instruction)


@dataclass
class Run:
    rc: int
    log: str


@dataclass
class Job:
    cfg: object
    lay: RunLayout
    argv: list[str]       # the first invocation's train.py argv (the plan's, plus rollout-only flags)
    first: Run
    resumed: Run | None   # None when the first invocation failed
    evaluated: Run | None  # the rollout that ends round 1, with the in-job eval hook; None when an earlier one failed
    debug: str            # --save-debug-rollout-data's template
    engines: list
    tmp: Path

    @property
    def rollouts(self) -> int:
        return FIRST + RESUMED + 1


def _inject_when_waited_for(lay: RunLayout, bank: Path) -> threading.Thread:
    """Write round 1's bank once the run's events say a rollout waits for it (the event it means,
    never a time); the thread ends by itself when the job does (a daemon)."""
    from pyhelpers.run import events

    def inject() -> None:
        while not any(e.get("kind") == "bank-wait" for e in events.read(lay.run_dir)):
            time.sleep(0.1)
        bank.parent.mkdir(parents=True, exist_ok=True)
        write_bank(bank, empty_bank(round=1))

    t = threading.Thread(target=inject, daemon=True, name="inject")
    t.start()
    return t


def _start_group(argv: list[str], env: dict, log: Path) -> subprocess.Popen:
    fh = open(log, "w")
    return subprocess.Popen(argv, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)


def _stop_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        except ProcessLookupError:
            pass


def _wait_for_line(proc: subprocess.Popen, log: Path, pattern: str, bound_s: float = 600) -> None:
    """Until `pattern` is in the log; the bound only catches a hang, a process that ends fails at once."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        if re.search(pattern, log.read_text(errors="replace")):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    raise RuntimeError(f"{log.name}: no {pattern!r} (rc {proc.poll()}):\n{log.read_text(errors='replace')[-3000:]}")


def _train(argv: list[str], env: dict, log: Path, procs: list) -> Run:
    train = _start_group([sys.executable, str(Path(os.environ["SHOPSIMRL_SLIME_DIR"]) / "train.py"), *argv], env, log)
    procs.append(train)
    rc = train.wait(timeout=600)  # a bound on a hang; both invocations stay below the lane's 900 s per test
    return Run(rc, log.read_text(errors="replace"))


def run(tmp: Path):
    """Generator: yields the Job, then stops everything it started."""
    from fakes import rehearsal
    from fakes.procs import start_fake_sglang, start_fake_shopsim, stop
    from support.port_claims import claim_block, claim_port

    world = rehearsal.build(tmp / "world")
    model = world / "models" / "Qwen3.5-4B"
    shop = start_fake_shopsim(world / "shop" / "items_eval_train.json", slots=48, seed=3, retries=3, delay=0.2)
    engines, procs = [], []
    ray_tmp = tempfile.mkdtemp(prefix="slray-", dir="/tmp")  # Ray's socket paths stay under 107 bytes
    try:
        for seed in range(ENGINES):
            engines.append(start_fake_sglang(model, policy=model / "fake_policy.json", seed=seed,
                                             args=["--fake-sampling", "episode"]))
        knobs = dict(rehearsal.SCALE)
        knobs.update(NUM_GPUS="1", SHOPSIM_HOST="127.0.0.1", SHOPSIM_PORT=str(shop.port),
                     TRAIN_TASKS=str(world / "data" / "train.jsonl"), VAL_TASKS=str(world / "data" / "val.jsonl"),
                     TORCH_DIST_MODEL=str(world / "models" / "Qwen3.5-4B_torch_dist"),
                     RAY_PORT=str(claim_block(10)), RAY_DASHBOARD_PORT=str(claim_port()), RAY_TEMP_DIR=ray_tmp)
        cfg, argv = plan_argv(tmp, 1, hf_model=model, **knobs)
        lay = from_config(cfg)
        # Ray: the plan's own head (launch/ray_start.ray_head), the venv's ray, one fake GPU. Its
        # workers inherit this environment: slime's code on PYTHONPATH, the test-only shims first.
        from pyhelpers.launch.ray_start import ray_head, ray_start_env
        from pyhelpers.launch.slime_args import runtime_env

        env = {**os.environ, **ray_start_env(cfg), **runtime_env(cfg)["env_vars"], "SHOPSIMRL_SLIME_SHIMS": "1",
               "WANDB_MODE": "offline", "WANDB_API_KEY": "slime-lane-fake-wandb-key", "RAY_DEDUP_LOGS": "0",
               "PYTHONPATH": os.pathsep.join([str(HERE / "shims"), os.environ["PYTHONPATH"]])}
        # Logical CPUs for Ray's scheduler: the Megatron actor's bundle and the RolloutManager take one
        # each and every external engine's actor 0.2 (external.py:213-215); a 2-core machine's own
        # count would leave the engines unplaced and the job waiting for ever.
        head = [str(Path(sys.executable).with_name("ray")), *ray_head(cfg)[1:], "--num-cpus", "8"]
        ray = _start_group(head, env, tmp / "ray-head.log")
        procs.append(ray)
        _wait_for_line(ray, tmp / "ray-head.log", r"Ray runtime started")
        debug = str(tmp / "debug" / "rollout_{rollout_id}.pt")
        base = [*argv, "--debug-rollout-only", "--rollout-external-engine-addrs", *[e.url for e in engines]]
        argv = [*base, "--num-rollout", str(FIRST), "--save-debug-rollout-data", debug]
        env["RAY_ADDRESS"] = f"127.0.0.1:{cfg.RAY_PORT}"
        first = _train(argv, env, tmp / "train.log", procs)
        resumed = evaluated = None
        if first.rc == 0:
            # Megatron's tracker names the last saved iteration (its save writes it last); slime's
            # parse_args only reads that it exists (arguments.py:1817-1820).
            lay.megatron.mkdir(parents=True, exist_ok=True)
            (lay.megatron / checkpoints.TRACKER).write_text(f"{FIRST}\n")
            # rollouts FIRST.. are round 1's (STEPS_PER_ROUND=FIRST): its bank, written as inject
            # would, once the plugin in slime's actor says it waits for it (rollout/bank_wait.py)
            inject = _inject_when_waited_for(lay, RoundFiles(lay.round_dir(1)).bank)
            resumed = _train([*argv, "--start-rollout-id", str(FIRST), "--num-rollout", str(FIRST + RESUMED)],
                             env, tmp / "train-resumed.log", procs)
            inject.join(5)
        if resumed is not None and resumed.rc == 0:
            (lay.megatron / checkpoints.TRACKER).write_text(f"{FIRST + RESUMED}\n")
            # what compile writes on the driver: round 1's bank, one candidate skill for the gate to test
            from support.skillbank import bank_of

            write_bank(RoundFiles(lay.round_dir(1)).compiled, bank_of([COMPILED_SKILL], statuses=["candidate"], round_=1))
            evaluated = _train([*base, "--start-rollout-id", str(FIRST + RESUMED), "--num-rollout", str(FIRST + RESUMED + 1),
                                *plugin.in_job_eval_flags(cfg.STEPS_PER_ROUND, str(cfg.VAL_TASKS))],
                               env, tmp / "train-evaluated.log", procs)
        yield Job(cfg, lay, argv, first, resumed, evaluated, debug, engines, tmp)
    finally:
        for p in reversed(procs):
            _stop_group(p)
        for e in engines:
            stop(e)
        stop(shop)
        shutil.rmtree(ray_tmp, ignore_errors=True)
