"""slime's real train.py in rollout-only mode drives the plugin (issue 42): `--debug-rollout-only`
(slime/utils/arguments.py:1919-1931 at 624b824; the Megatron actor returns from init at once,
backends/megatron_utils/actor.py:67) with two external stand-in engines
(`--rollout-external-engine-addrs`, arguments.py:1904-1907, backends/sglang_utils/external.py)
behind slime's real sglang_router, the stand-in ShopSimulator and the rehearsal's world (its
tokenizer, fake policy and task files: tests/fakes/rehearsal.py build), on a Ray head of the test's
own with fake GPUs. The plan's own train.py argv, plus only what rollout-only mode needs.

The job runs once per module (two rollouts); each test reads back one thing it wrote. The test-only
shims (tests_slime/shims/sitecustomize.py) are listed in tests/fakes/README.md."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from plan import plan_argv

from pyhelpers.run.layout import from_config

HERE = Path(__file__).resolve().parent
ROLLOUTS = 2
ENGINES = 2


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


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """Runs the job once; yields (cfg, layout, rc, log text, tmp)."""
    from fakes import rehearsal
    from fakes.procs import start_fake_sglang, start_fake_shopsim, stop
    from support.port_claims import claim_block, claim_port

    tmp = tmp_path_factory.mktemp("rollout-only")
    world = rehearsal.build(tmp / "world")
    model = world / "models" / "Qwen3.5-4B"
    shop = start_fake_shopsim(world / "shop" / "items_eval_train.json", slots=48, seed=3, retries=3, delay=0.2)
    engines, procs = [], []
    ray_tmp = tempfile.mkdtemp(prefix="slray-", dir="/tmp")  # Ray's socket paths stay under 107 bytes
    try:
        for seed in range(ENGINES):
            engines.append(start_fake_sglang(model, policy=model / "fake_policy.json", seed=seed,
                                             args=["--fake-sampling", "episode"]))
        knobs = {k: v for k, v in rehearsal.SCALE.items()}
        knobs.update(NUM_GPUS="1", SHOPSIM_HOST="127.0.0.1", SHOPSIM_PORT=str(shop.port),
                     TRAIN_TASKS=str(world / "data" / "train.jsonl"), VAL_TASKS=str(world / "data" / "val.jsonl"),
                     TORCH_DIST_MODEL=str(world / "models" / "Qwen3.5-4B_torch_dist"),
                     RAY_PORT=str(claim_block(10)), RAY_DASHBOARD_PORT=str(claim_port()), RAY_TEMP_DIR=ray_tmp)
        cfg, argv = plan_argv(tmp, 1, hf_model=model, **knobs)
        lay = from_config(cfg)
        # Ray: the plan's own head (launch/ray_start.ray_head), the venv's ray, one fake GPU. Its
        # workers inherit this environment: slime's code on PYTHONPATH, the test-only shims first.
        from pyhelpers.launch import ray_start, slime_args

        env = {**os.environ, **ray_start.ray_start_env(cfg), **slime_args.runtime_env(cfg)["env_vars"], "SHOPSIMRL_SLIME_SHIMS": "1",
               "WANDB_MODE": "offline", "WANDB_API_KEY": "slime-lane-fake-wandb-key", "RAY_DEDUP_LOGS": "0",
               "PYTHONPATH": os.pathsep.join([str(HERE / "shims"), os.environ["PYTHONPATH"]])}
        # Logical CPUs for Ray's scheduler: the Megatron actor's bundle and the RolloutManager take one
        # each and every external engine's actor 0.2 (external.py:213-215); a 2-core machine's own
        # count would leave the engines unplaced and the job waiting for ever.
        head = [str(Path(sys.executable).with_name("ray")), *ray_start.ray_head(cfg)[1:], "--num-cpus", "8"]
        ray = _start_group(head, env, tmp / "ray-head.log")
        procs.append(ray)
        _wait_for_line(ray, tmp / "ray-head.log", r"Ray runtime started")
        debug = tmp / "debug"
        argv = [*argv, "--debug-rollout-only", "--rollout-external-engine-addrs", *[e.url for e in engines],
                "--num-rollout", str(ROLLOUTS), "--save-debug-rollout-data", str(debug / "rollout_{rollout_id}.pt")]
        env["RAY_ADDRESS"] = f"127.0.0.1:{cfg.RAY_PORT}"
        train = _start_group([sys.executable, str(Path(os.environ["SHOPSIMRL_SLIME_DIR"]) / "train.py"), *argv],
                             env, tmp / "train.log")
        procs.append(train)
        rc = train.wait(timeout=780)  # a bound on a hang, below the lane's 900 s per test
        yield cfg, lay, rc, (tmp / "train.log").read_text(errors="replace"), tmp, engines
    finally:
        for p in reversed(procs):
            _stop_group(p)
        for e in engines:
            stop(e)
        stop(shop)
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_slimes_train_py_runs_two_rollouts_of_the_plugin(job):
    cfg, lay, rc, log, tmp, _ = job
    assert rc == 0, f"slime's train.py exited {rc}:\n{log[-6000:]}"
    assert "import pyhelpers.rollout.rollout.generate_rollout as generate_rollout function" in log


def test_the_plugin_wrote_its_records_as_in_a_real_run(job):
    cfg, lay, rc, log, tmp, _ = job
    assert rc == 0
    spool = sorted(p.name for p in lay.spool(0).rglob("*") if p.is_file())
    assert spool, f"no spool records under {lay.spool(0)}"
    metrics = [json.loads(line) for line in lay.rollout_metrics(0).read_text().splitlines()]
    assert [m["rollout_id"] for m in metrics] == list(range(ROLLOUTS))
    assert all(m["metrics"]["rollout/shopsim/episodes"] > 0 for m in metrics), metrics
    states = sorted(p.name for p in (Path(cfg.TRAIN_SAVE)).rglob("shopsimrl_data_state_*.json"))
    assert states == [f"shopsimrl_data_state_{i}.json" for i in range(ROLLOUTS)], states


def _wandb_history(run_dir: Path) -> list[dict]:
    """History items of the job's offline W&B runs, read with W&B's own reader."""
    items = []
    for d in sorted((run_dir / "wandb" / "wandb").glob("offline-run-*")):
        out = subprocess.run([str(Path(sys.executable).with_name("wandb")), "leet", "inspect", "--json", str(d)],
                             capture_output=True, text=True, timeout=300, check=True).stdout
        recs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        items += [r["history"]["item"] for r in recs if r["type"] == "history"]
    return items


def test_slime_logged_the_plugins_metrics_to_wandb(job):
    cfg, lay, rc, log, tmp, _ = job
    assert rc == 0
    logged = {int(i["rollout/step"]): i["rollout/shopsim/success_rate"] for i in _wandb_history(lay.run_dir)
              if "rollout/shopsim/success_rate" in i}
    written = {m["rollout_id"]: m["metrics"]["rollout/shopsim/success_rate"]
               for m in map(json.loads, lay.rollout_metrics(0).read_text().splitlines())}
    assert logged == written and len(logged) == ROLLOUTS


def test_no_404_or_retry_storm_in_the_logs(job):
    """slime's control calls (server_info, abort, loads, flush) each found their endpoint on the
    stand-in engines: a 404 or slime's abort retries (server_control.py:32-52) would show here."""
    cfg, lay, rc, log, tmp, engines = job
    assert rc == 0
    for name, text in [("train.log", log), *((e.url, e.stderr()) for e in engines)]:
        assert not re.search(r"\b404\b", text), f"{name}: a 404"
    # slime asks each engine once per rollout; a missing endpoint makes it try again and again
    # (server_control.py:43-60: "Failed to abort ...", "Failed to get SGLang server load ...").
    assert not re.findall(r"Failed to (abort SGLang server|get SGLang server load).*", log)
    assert len(re.findall(r"Abort request for SGLang server", log)) <= ENGINES * ROLLOUTS
