"""The run's long-lived services, defined once: how each starts, which address it needs, when it
is ready (architecture §5).

| service     | runs in      | command                                   | ready when                      |
|-------------|--------------|-------------------------------------------|---------------------------------|
| shopsim     | SHOPSIM_ENV  | the ShopSimulator launcher (M6)           | the no-slot probe answers       |
| shopsim-gate| the toolkit  | the gate on NODE_ADDR (NNODES > 1 only)   | the probe answers through it    |
| ray-head    | SLIME_ENV    | ray start --head --block ... (loopback)   | /api/version (token), agent up |
| eval-server | SLIME_ENV    | SGLang, TP=1, DP=NUM_GPUS on a model (M9) | GET /health answers 200         |

Each is started through bin/in-env (conda activate, so activate.d hooks run: M4) in its own
process group with a pidfile (pyhelpers/procs/groups.py); the addresses it binds are checked free
first (a holder that is not ours is named). The Ray head is locked down (pyhelpers/launch/ray_*.py):
every port from the configuration, all on loopback, the run's token required; before it starts,
its token is made and its old sessions pruned, and once up its new session is recorded. `ensure()` starts a service unless it is up and waits until
it answers, with its *_START_TIMEOUT knob; on failure the error carries its log's tail. A Ray head
whose group lives but whose `ray start` or GCS is gone is not up: ray-lost (launch/ray_lost.py).
`watch_shopsim()` restarts a ShopSimulator that dies during a round, at most SHOPSIM_MAX_RESTARTS
times per round, each restart an event in events.jsonl.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyhelpers.config import jit_caches, ray_ports
from pyhelpers.config.load import Config
from pyhelpers.errors import ToolkitError
from pyhelpers.launch import (
    gate_auth,
    node_agent,
    node_env,
    ray_auth,
    ray_lost,
    ray_sessions,
    ray_start,
    secret_env,
    sglang_server,
    shopsim_server,
)
from pyhelpers.procs import groups, procfs, ready
from pyhelpers.run import events
from pyhelpers.run.layout import RunLayout
from pyhelpers.shopsim.gate import read_token

RAY_READY_PATH = "/api/version"
# How the head stops (ray 2.60.0). Its `ray start --block` ends its node itself on TERM: the
# raylet first, as `ray stop` does (ray/scripts/scripts.py:1467-1485), then the GCS and the rest,
# a second each before it KILLs one (ray/_private/node.py:629-664, kill_all_processes :2033). So
# the head's group is stopped through that process (stop_leader_first), not with `ray stop`, which
# ends every Ray process of the machine by name. A TERM to the whole group hit the GCS with it, and
# its TERM handler, which first drains the node through the GCS for up to 30 s (:666-756, for Ray
# Serve's requests), waited on a GCS that was gone until STOP_GRACE ran out: killed on every run.
# The run serves no requests and stops its job before the head: no drain.
RAY_HEAD_STOP_ENV = {"RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
# How the head starts (ray 2.60.0). `ray start` gives the raylet it just started a fixed 30 s to
# register with the GCS (ray/_private/node.py:424-444; no setting changes it), and on a busy machine
# one call to the GCS can take longer than that (it waits RAY_START_TIMEOUT for the node:
# ray_start.ray_start_env): it raises these words, and its exit ends the head.
# Its dashboard and agent may answer meanwhile, so the head is ready only once Ray says its node
# started (node_agent.STARTED; ray/scripts/scripts.py:1085 prints it for a head), and a start that missed the wait is started again, up to
# node_agent.START_ATTEMPTS in all, as a worker's node agent does.
RAY_MISSED_REGISTRATION = "The current node timed out during startup"


@dataclass(frozen=True)
class Spec:
    argv: list[str]
    env_extra: dict[str, str]
    address: tuple[str, int]
    probe: ready.Probe
    timeout_knob: str
    more_ports: tuple[tuple[str, int], ...] = ()  # checked free before the start, like address
    env_drop: tuple[str, ...] = ()  # taken out of the inherited environment
    before_start: Callable[[], list[str]] = lambda: []  # returns lines to show
    once_up: Callable[[set[int]], None] = lambda pids: None  # given the service's pids
    stop_leader_first: bool = False  # its own process ends its group (procs/groups.py stop_group)
    # when its group lives: raises if the service is not whole all the same (ensure's "already up")
    check_whole: Callable[[], None] = lambda: None


def _shopsim_probe(url: str, token: Callable[[], str] = lambda: "") -> ready.Probe:
    def probe() -> tuple[bool, str]:
        # local: shopsim.client imports httpx (~70 ms), needed only when ShopSimulator is probed
        from pyhelpers.shopsim.answers import unusable_server
        from pyhelpers.shopsim.client import ShopSimClient, ShopSimError
        from pyhelpers.shopsim.protocol import UnusableServer

        async def ask() -> bool:
            async with ShopSimClient(url, token=token()) as client:
                return await client.probe()

        try:
            ok = asyncio.run(ask())
        except UnusableServer as exc:
            raise unusable_server(exc, url) from None
        except (ShopSimError, OSError) as exc:
            return False, f"{url}: {exc}"
        return ok, f"{url}: no-slot probe {'answered' if ok else 'not answered'}"
    return probe


def spec(cfg: Config, lay: RunLayout, name: str, model: str | None = None) -> Spec:
    in_env = str(cfg.root / "bin" / "in-env")
    if name == "shopsim":
        host, port = cfg.SHOPSIM_HOST, cfg.SHOPSIM_PORT
        return Spec([in_env, cfg.SHOPSIM_ENV, *shopsim_server.shopsim(cfg)],
                    {"SHOPSIM_ENV_MAX_NUM": str(cfg.SHOPSIM_SLOTS), "SHOPSIM_RESET_RETRIES": str(cfg.SHOPSIM_RESET_RETRIES),
                     "SHOPSIM_RESET_DELAY": f"{cfg.SHOPSIM_RESET_DELAY:g}"},
                    address=(host, port), probe=_shopsim_probe(f"http://{host}:{port}"), timeout_knob="SHOPSIM_START_TIMEOUT")
    if name == "shopsim-gate":
        return _shopsim_gate(cfg, lay)
    if name == "ray-head":
        return _ray_head(cfg, lay, in_env)
    if name == "eval-server":
        port = cfg.EVAL_PORT
        return Spec([in_env, cfg.SLIME_ENV, *sglang_server.eval_server(cfg, model or str(lay.hf_link))],
                    jit_caches.env(cfg),
                    address=("127.0.0.1", port), probe=ready.http_probe(f"http://127.0.0.1:{port}/health"), timeout_knob="SGLANG_START_TIMEOUT")
    raise ToolkitError(f"unknown service {name!r}", "pyhelpers run service", "use shopsim, ray-head or eval-server")


def _shopsim_gate(cfg: Config, lay: RunLayout) -> Spec:
    """ShopSimulator's gate (NNODES > 1): the rollout plugin may run on any node (docs/multinode.md)."""
    host, port = cfg.NODE_ADDR, cfg.SHOPSIM_PORT
    token_file = gate_auth.token_file(lay.run_dir)
    argv = [sys.executable, "-m", "pyhelpers.shopsim.gate", "--listen", f"{host}:{port}",
            "--upstream", f"{cfg.SHOPSIM_HOST}:{port}", "--token-file", str(token_file)]
    return Spec(argv, {}, address=(host, port),
                probe=_shopsim_probe(f"http://{host}:{port}", token=lambda: read_token(token_file)),
                timeout_knob="SHOPSIM_START_TIMEOUT", before_start=lambda: _token_made(lay))


def _token_made(lay: RunLayout) -> list[str]:
    """The gate's before_start: its token exists (0600, under the shared run dir) before it listens."""
    gate_auth.ensure_token(lay.run_dir)
    return []


def _ray_head(cfg: Config, lay: RunLayout, in_env: str) -> Spec:
    port = cfg.RAY_DASHBOARD_PORT
    temp = cfg.ray_temp_dir

    def before_start() -> list[str]:
        ray_auth.ensure_token(lay.run_dir)
        gone = ray_sessions.prune(lay.run_dir, temp)
        said = [f"removed {len(gone)} old Ray session(s) of this run from {temp}"] if gone else []
        return said + _no_raylet_naming_the_gcs(cfg)

    return Spec([in_env, cfg.SLIME_ENV, *ray_start.ray_head(cfg)],
                # node_env: this node's own address and interface, no proxy (docs/multinode.md §7)
                {**ray_ports.env(cfg), **ray_start.ray_start_env(cfg), **ray_auth.head_env(lay.run_dir),
                 **node_env.of_this_node(cfg),
                 **jit_caches.env(cfg), **RAY_HEAD_STOP_ENV},
                address=("127.0.0.1", port),
                # The job API answers 500 "No available agent" until the dashboard agent is up (it
                # waits 10 s for it: ray 2.60 dashboard/modules/job/job_head.py:294-319), which on a
                # busy machine comes seconds after the dashboard: ready once both answer.
                probe=ready.all_of(ready.http_probe(f"http://127.0.0.1:{port}{RAY_READY_PATH}",
                                              headers=lambda: ray_auth.headers(lay.run_dir)),
                             ready.tcp_probe("127.0.0.1", ray_ports.port_of(cfg, "dashboard agent HTTP")),
                             _ray_node_started(lay)),
                timeout_knob="RAY_START_TIMEOUT", more_ports=tuple(("127.0.0.1", p.port) for p in ray_ports.ports(cfg)),
                env_drop=ray_auth.OVERRIDING + node_env.dropped(cfg), before_start=before_start,
                once_up=lambda pids: ray_sessions.record(lay.run_dir, temp, pids), stop_leader_first=True,
                check_whole=lambda: _ray_head_whole(cfg, lay))


def _this_start(log: str | Path) -> str:
    """What a service's log holds since its latest start (procs.spawn's `==> ... start` line)."""
    return "\n".join(groups.log_tail(log, 10**6)).rpartition("\n==> ")[2]


def _ray_node_started(lay: RunLayout) -> ready.Probe:
    """Ready once the head's `ray start` says its node started; a `ray start` that ended before
    that ends the wait at once (what it started may linger in its group: no live head)."""
    def probe() -> tuple[bool, str]:
        rec = groups.find(lay.pids, ray_lost.SERVICE)
        if node_agent.STARTED.decode() in _this_start(rec.log):
            return True, "ray start: Ray runtime started"
        st = procfs.read_stat(rec.pid)
        if not st or st.start_ticks != rec.start_ticks or st.state == "Z":
            raise ready.NotReady("died", f"its `ray start` (pid {rec.pid}) ended before Ray said its node started",
                                 what="the process exited before it was ready", where="", fix="")
        return False, "ray start: its node has not registered with the GCS yet"
    return probe


def _no_raylet_naming_the_gcs(cfg: Config, poll: float = 0.5) -> list[str]:
    """Before the head's Ray starts again: up to RAY_START_TIMEOUT until no raylet of this host still
    names its GCS address, which `ray start --head` would refuse (ray_lost.raylets_naming)."""
    gcs = f"{ray_start.head_node_addr(cfg)}:{ray_ports.port_of(cfg, 'GCS')}"
    end, first = time.monotonic() + cfg.RAY_START_TIMEOUT, ray_lost.raylets_naming(gcs)
    left = first
    while left and time.monotonic() < end:
        time.sleep(poll)
        left = ray_lost.raylets_naming(gcs)
    if not first:
        return []
    return [f"waited for raylet(s) {first} still naming the head's GCS {gcs} to end (a worker's, which gives up on "
            "a lost GCS within a minute)" + (f"; still there: {left}" if left else "")]


def _ray_head_whole(cfg: Config, lay: RunLayout) -> None:
    """What `ray start` left in the group may outlive a dead GCS, raylet or dashboard (ray_lost.py):
    such a head is lost, not up."""
    lost = ray_lost.why_lost(cfg, lay)
    if lost:
        raise ray_lost.error(lost, str(lay.logs / "ray-head.log"))


def alive(lay: RunLayout, name: str) -> bool:
    path = groups.pidfile(lay.pids, name)
    return path.exists() and groups.state(groups.load(path)) == "alive"


def start(cfg: Config, lay: RunLayout, name: str, *, model: str | None = None, round_: int | None = None,
          progress: Callable[[str], None] = lambda s: None) -> groups.Record:
    """Start `name` (its address checked free first) without waiting for it."""
    s = spec(cfg, lay, name, model=model)
    for line in s.before_start():
        progress(line)
    progress(f"starting {name} on {s.address[0]}:{s.address[1]} (log: {lay.logs / (name + '.log')})")
    env = {k: v for k, v in os.environ.items() if k not in s.env_drop}
    rec = groups.start(name, s.argv, pids_dir=lay.pids, logs_dir=lay.logs, env={**env, **s.env_extra},
                      needs_ports=list(dict.fromkeys([s.address, *s.more_ports])), stop_leader_first=s.stop_leader_first)
    events.append(lay.run_dir, "service-start", service=name, pid=rec.pid,
                  **({"round": round_} if round_ is not None else {}))
    return rec


def wait(cfg: Config, lay: RunLayout, name: str, *, model: str | None = None, round_: int | None = None) -> str:
    """Wait until a started `name` answers (its *_START_TIMEOUT); NotReady carries its log's tail."""
    s = spec(cfg, lay, name, model=model)
    took = ready.wait_service(lay.pids, name, s.probe, timeout=cfg.float(s.timeout_knob),
                              backoff_max=cfg.READY_BACKOFF_MAX, knob=s.timeout_knob)
    rec = groups.load(groups.pidfile(lay.pids, name))
    s.once_up(set(procfs.group_members(rec.pgid)))
    events.append(lay.run_dir, "service-ready", service=name, seconds=round(took, 3),
                  **({"round": round_} if round_ is not None else {}))
    return f"{name}: ready after {took:.1f} s"


def ensure(cfg: Config, lay: RunLayout, name: str, *, model: str | None = None, round_: int | None = None,
           progress: Callable[[str], None] = lambda s: None) -> str:
    """Start `name` unless it is up, and wait until it answers. Returns what happened. A service
    whose group lives but which is not whole (spec's check_whole) raises."""
    if alive(lay, name):
        spec(cfg, lay, name, model=model).check_whole()
        return f"{name}: already up"
    attempts = node_agent.START_ATTEMPTS if name == ray_lost.SERVICE else 1
    for attempt in range(1, attempts + 1):
        rec = start(cfg, lay, name, model=model, round_=round_, progress=progress)
        try:
            return wait(cfg, lay, name, model=model, round_=round_)
        except ready.NotReady:
            said = _this_start(rec.log)
            if attempts == 1 or RAY_MISSED_REGISTRATION not in said:
                raise
            groups.stop(rec, cfg.STOP_GRACE, pids_dir=lay.pids)  # what the missed start left in its group
            if attempt < attempts:
                progress(f"{name}: Ray's node missed Ray's fixed 30 s wait to register with its GCS (a busy "
                         f"machine): starting it again (attempt {attempt + 1} of {attempts})")
    raise ray_lost.error(f"its `ray start` missed Ray's fixed 30 s registration wait in {attempts} attempts "
                         f"({RAY_MISSED_REGISTRATION}): the machine is too busy for Ray to start", str(rec.log))


# Work off the loop's path, as recorded services: name -> its `pyhelpers run` command.
BACKGROUND = {"wandb-log": "log-wandb",  # after each evaluate (unless WANDB_MODE=disabled)
              "report": "report"}        # after each round's inject but the last (the run's end writes that)


def plan_line(cfg: Config, lay: RunLayout, name: str, note: str = "", **kw) -> tuple[str, str, str]:
    """(name, command line, note) of service `name` for `make plan`: the very argv start() runs."""
    return name, shlex.join(spec(cfg, lay, name, **kw).argv), note


def background_argv(name: str) -> list[str]:
    """The command line of background service `name`, with the toolkit's own python."""
    return [sys.executable, "-m", "pyhelpers", "run", BACKGROUND[name]]


def _background_env(cfg: Config, name: str) -> dict[str, str] | None:
    """wandb-log gets the W&B key (secret_env.USERS); the others inherit the driver's environment,
    which holds no secret."""
    return secret_env.for_user(cfg, name) if name in secret_env.USERS else None


def run_in_background(cfg: Config, lay: RunLayout, name: str) -> None:
    """Background service `name` (BACKGROUND) unless one runs: `make stop` and `make resume` find it
    by its pidfile."""
    if not alive(lay, name):
        groups.start(name, background_argv(name), pids_dir=lay.pids, logs_dir=lay.logs, env=_background_env(cfg, name))


def log_wandb(cfg: Config, lay: RunLayout, poll: float = 0.2) -> list[str]:
    """The run's last W&B logging, waited for: `pyhelpers run log-wandb` as service wandb-log (a
    child, so that the W&B key is in its environment only, not in the driver's), once a background
    one has finished. Returns the lines it wrote; fails with its log's tail when it fails. Under
    WANDB_MODE=disabled it starts nothing, as the rounds (stages/eval_session.py) and `make plan` do."""
    if cfg.WANDB_MODE == "disabled":
        return []
    while alive(lay, "wandb-log"):  # the last evaluation's logger: the same work, under the same lock
        time.sleep(poll)
    log = lay.logs / "wandb-log.log"
    start_at = log.stat().st_size if log.exists() else 0
    _, child = groups.spawn("wandb-log", background_argv("wandb-log"), pids_dir=lay.pids, logs_dir=lay.logs,
                           env=_background_env(cfg, "wandb-log"))
    rc = child.wait()
    with open(log, "rb") as fh:
        fh.seek(start_at)
        lines = fh.read().decode("utf-8", "replace").splitlines()
    if rc != 0:
        raise ToolkitError(f"logging to W&B failed (exit {rc}): " + " | ".join(lines[-3:]), str(log),
                           "fix the cause, then `make resume` logs what W&B still lacks")
    return [line for line in lines if line.startswith("W&B ")]  # its own; wandb's chatter stays in the log


def stop(cfg: Config, lay: RunLayout, *names: str) -> list[str]:
    """Stop the named services if they run (TERM, STOP_GRACE, KILL)."""
    return [r.message for r in groups.stop_all(lay.pids, cfg.STOP_GRACE, names=names, missing_ok=True)]


def free_all_slots(cfg: Config, lay: RunLayout, stage: str, round_: int | None) -> str:
    """Free every ShopSimulator slot before a stage plays (the run owns the simulator and nothing
    is playing): a killed job leaves the slots it held taken, and so does a reset that failed after
    pack_api popped a slot (docs/shopsim_protocol.md); nobody can name those. An event records it."""
    from pyhelpers.shopsim.client import ShopSimClient  # local: httpx, as in _shopsim_probe

    async def call():
        async with ShopSimClient(f"http://{cfg.SHOPSIM_HOST}:{cfg.SHOPSIM_PORT}") as client:
            return await client.release_all()

    said = str(asyncio.run(call()))
    events.append(lay.run_dir, "shopsim-slots-freed", stage=stage, round=round_)
    return said


def restarts(lay: RunLayout, round_: int, name: str = "shopsim") -> int:
    return sum(1 for e in events.read(lay.run_dir)
               if e.get("kind") == "service-restart" and e.get("service") == name and e.get("round") == round_)


@contextlib.contextmanager
def shopsim_watched(cfg: Config, lay: RunLayout, round_: int, on_give_up: Callable[[str], None],
                    progress: Callable[[str], None]):
    """ShopSimulator restarted (watch_shopsim, on a thread) while the block runs: the stage's episodes
    wait SHOPSIM_START_TIMEOUT for a simulator that died, and nothing else would start it again."""
    stop = threading.Event()
    watchdog = threading.Thread(target=watch_shopsim, daemon=True, name="shopsim-watchdog",
                                args=(cfg, lay, round_, stop.wait, on_give_up, progress))
    watchdog.start()
    try:
        yield
    finally:
        stop.set()
        watchdog.join(timeout=5)


def watch_shopsim(cfg: Config, lay: RunLayout, round_: int, stopped: Callable[[float], bool],
                  on_give_up: Callable[[str], None], progress: Callable[[str], None] = lambda s: None,
                  poll: float = 1.0) -> None:
    """Restart ShopSimulator when it dies, at most SHOPSIM_MAX_RESTARTS times in this round (then
    on_give_up(reason)), until stopped(timeout) -- e.g. threading.Event.wait -- returns True."""
    limit = cfg.SHOPSIM_MAX_RESTARTS
    while not stopped(poll):
        if not alive(lay, "shopsim"):
            done = restarts(lay, round_)
            tail = " | ".join(groups.log_tail(lay.logs / "shopsim.log", 3))
            if done >= limit:
                reason = (f"ShopSimulator died {done + 1} times in round {round_} (SHOPSIM_MAX_RESTARTS={limit}); "
                          f"last log lines: {tail}")
                events.append(lay.run_dir, "service-gave-up", service="shopsim", round=round_, reason=reason)
                on_give_up(reason)
                return
            events.append(lay.run_dir, "service-restart", service="shopsim", round=round_, count=done + 1,
                          log_tail=tail)
            progress(f"ShopSimulator died during round {round_}; restart {done + 1} of {limit}")
            try:
                progress(ensure(cfg, lay, "shopsim", round_=round_))
            except ToolkitError as exc:
                progress(f"restart failed: {exc}")
