"""A run across NNODES machines (docs/multinode.md): what the head checks once its Ray is up, and what a
worker checks before it joins. Every question goes to Ray through node_probe.py under the slime env's
interpreter (the versions compared are that env's; a Ray driver must run the cluster's own Python),
with the run's token by path in its environment.

Head (`make train`, NNODES > 1), after the ray-head service answers:
  publish()            into Ray's GCS: its storage record (fresh nonces under TRAIN_SAVE and the run dir,
                       hashes of the read-only inputs: node_storage.py), then its versions and toolkit commit
  wait_for_workers()   up to JOIN_TIMEOUT for NNODES-1 workers of NUM_GPUS GPUs, printing who joined
  check_storage()      the record read back by a task pinned to each worker (NodeAffinitySchedulingStrategy);
                       a node found wrong is removed (remove_node), not the run
Worker (`make join`): the checks of join_checks.py (token, head's versions, room in the cluster,
storage), then the ray-worker service (node_agent.py), supervised like every service under
runs/<RUN>/nodes/<NODE_ADDR>/.
Both sides: the nodes' records in the shared run dir; their heartbeats and `make status`'s lines for
them are node_heartbeats.py's.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from pyhelpers.config import ray_ports
from pyhelpers.config.load import Config
from pyhelpers.errors import ToolkitError
from pyhelpers.jsonfiles import load_json_or_none, write_json_atomic
from pyhelpers.launch import node_env, node_storage, ray_auth, ray_start
from pyhelpers.launch.node_heartbeats import worker_records
from pyhelpers.launch.node_probe import MARKER
from pyhelpers.run import events, layout
from pyhelpers.run.layout import RunLayout

PROBE = Path(__file__).with_name("node_probe.py")
VERSIONS_KEY = "versions"
COMPARED = ("toolkit", "python", "ray", "slime", "sglang", "megatron-core")


def gcs_address(cfg, head: bool = True) -> str:
    return f"{cfg.NODE_ADDR if head else cfg.HEAD_ADDR}:{cfg.RAY_PORT}"


def token_path(cfg, lay: RunLayout) -> Path:
    """The run's token as this node reads it: RAY_TOKEN_FILE (a copy the user made) or the shared run dir's."""
    return cfg.RAY_TOKEN_FILE or layout.ray_token(lay.run_dir)


WORKER_SERVICE = "ray-worker"  # the service `make join` starts (node_keeper.py, which runs node_agent.py); its log is <node dir>/logs/ray-worker.log


def node_dir(lay: RunLayout, addr: str) -> Path:
    """A worker's own files in the shared run dir: pids/, logs/, node.json (who it is, its heartbeat)."""
    return lay.run_dir / "nodes" / addr


def ray_generation(lay: RunLayout, addr: str) -> list | None:
    """Which start of worker `addr`'s Ray its node agent is on (its pid, its keeper's restarts of it,
    its rejoins, the attempt), from its node.json; None when it wrote none. The agent writes a new
    value before each `ray start` runs (launch/node_agent.py), so a value that changed under a job
    means the job's node was replaced, even where Ray's GCS still lists the old one ALIVE and the
    new raylet answers on the same port."""
    return generation_of(load_json_or_none(node_dir(lay, addr) / "node.json"))


def generation_of(info: dict | None) -> list | None:
    """ray_generation of a node.json already read (None for none)."""
    if not info:
        return None
    return [info.get("pid"), info.get("agent_restarts", 0), info.get("rejoins", 0), info.get("attempt")]


def probe(cfg, lay: RunLayout, *args: str, stdin: str = "", timeout: float = 180) -> dict:
    where = args[1] if len(args) > 1 else "this node"
    """node_probe.py `args` under the slime env; its JSON, or a ToolkitError naming Ray's refusal."""
    env = {k: v for k, v in os.environ.items() if k not in ray_auth.OVERRIDING}
    env.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_path(cfg, lay))})
    argv = [str(cfg.root / "bin" / "in-env"), cfg.SLIME_ENV, "python3", str(PROBE), *args]
    try:
        r = subprocess.run(argv, env=env, input=stdin, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ToolkitError(f"Ray did not answer `{args[0]}` within {timeout:.0f} s", where,
                           "is the head's Ray up (make status on the head)? then retry") from None
    line = next((ln for ln in reversed(r.stdout.splitlines()) if ln.startswith(MARKER)), None)
    if line is None:
        tail = " | ".join((r.stdout + r.stderr).strip().splitlines()[-3:])
        raise ToolkitError(f"the node probe `{args[0]}` failed (exit {r.returncode}): {tail}", str(PROBE),
                           "check the slime env (make doctor)")
    out = json.loads(line[len(MARKER):])
    if "error" in out:
        raise ToolkitError(f"Ray refused `{args[0]}`: {out['error'][:300]}", where, refusal_fix(out["error"]))
    return out


def is_auth_refusal(text: str) -> bool:
    """Ray's answer to a caller without the run's token (gRPC UNAUTHENTICATED / InvalidAuthToken)."""
    low = text.lower()
    return "unauthenticated" in low or "invalidauthtoken" in low or "authentication token" in low


def refusal_fix(error: str) -> str:
    """The fix for a Ray refusal (probe's, and join_checks.py's own reading of one)."""
    if is_auth_refusal(error):
        return ("this node lacks the run's Ray token: the head's runs/<RUN>/ray/auth-token must reach it by "
                "path (the shared run dir, or a copy named by RAY_TOKEN_FILE, mode 0600)")
    return "is the head's Ray up and HEAD_ADDR/RAY_PORT reachable from here (docs/multinode.md §3)?"


def toolkit_commit(root: Path) -> str:
    """The checkout's commit, '+modified' when tracked files differ from it."""
    def git(*args):
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True).stdout.strip()

    commit = git("rev-parse", "HEAD") or "unknown"
    return commit + ("+modified" if git("status", "--porcelain", "--untracked-files=no") else "")


def local_versions(cfg, lay: RunLayout) -> dict:
    return {"toolkit": toolkit_commit(cfg.root), **probe(cfg, lay, "versions")}


def publish_storage(cfg, lay: RunLayout) -> dict:
    """Fresh nonces and the inputs' hashes (node_storage.record), stored in the head's GCS for workers."""
    rec = node_storage.record(cfg, lay)
    probe(cfg, lay, "kv-put", gcs_address(cfg), node_storage.STORAGE_KEY, stdin=json.dumps(rec, sort_keys=True))
    return rec


def publish(cfg, lay: RunLayout) -> tuple[dict, dict]:
    """What a joining worker compares with, into the head's GCS: the storage record first, then the
    versions (a worker that finds the versions finds the record). Returns (versions, record)."""
    rec = publish_storage(cfg, lay)
    mine = local_versions(cfg, lay)
    probe(cfg, lay, "kv-put", gcs_address(cfg), VERSIONS_KEY, stdin=json.dumps(mine, sort_keys=True))
    return mine, rec


def worker_env(cfg, lay: RunLayout) -> dict[str, str]:
    """The worker node's environment: the token by path, the run's ports Ray reads from its
    environment, the shim that keeps metrics on loopback, and the node's own address and socket
    interface (node_env: SLIME_HOST_IP, NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME; its proxies are dropped
    by the caller, node_env.dropped)."""
    env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_path(cfg, lay))}
    env.update({k: v for k, v in ray_ports.env(cfg).items()})
    env.update(ray_start.ray_start_env(cfg))  # RAY_START_TIMEOUT for its node to register
    env.update(node_env.of_this_node(cfg))
    return env


def worker_argv(cfg) -> list[str]:
    """What the ray-worker service runs (node_agent.py; `make plan` on the head shows it)."""
    argv = ray_start.ray_worker(cfg)
    argv[argv.index("--temp-dir") + 1] = worker_temp_dir(cfg)
    return [str(cfg.root / "bin" / "in-env"), cfg.SLIME_ENV, *argv]


def worker_plan_line(cfg: Config) -> tuple[str, str, str]:
    """`make plan`'s line for what `make join` starts on each worker, as this head's configuration
    says it (the worker's own NODE_ADDR and NET_IFACE are its .env's)."""
    wcfg = replace(cfg, values={**cfg.values, "HEAD_ADDR": cfg.NODE_ADDR, "NODE_ADDR": "<its NODE_ADDR>",
                                "NET_IFACE": "<its NET_IFACE>"})
    return (f"worker (make join HEAD_ADDR={cfg.NODE_ADDR} on each of the {cfg.NNODES - 1} worker(s))",
            shlex.join(worker_argv(wcfg)), "its environment: " + node_env_text(wcfg))


def node_env_text(cfg: Config) -> str:
    """A node's own `ray start` environment, as `make plan` shows it."""
    return ", ".join(f"{k}={v}" for k, v in node_env.of_this_node(cfg).items()) + ", no proxy variable"


def worker_temp_dir(cfg) -> str:
    """A worker's Ray temp dir: the run's plus '-w', so that two nodes on one host (the rehearsal's
    namespaces share /tmp) never share a session, and the head's cleanup, which matches its own temp dir
    exactly (procs/procfs.marker_matches), never takes a worker's processes for its own."""
    return cfg.ray_temp_dir + "-w"


def nodes(cfg, lay: RunLayout) -> list[dict]:
    return probe(cfg, lay, "nodes", gcs_address(cfg))["nodes"]


def wait_for_workers(cfg, lay: RunLayout, echo: Callable[[str], None], poll: float = 2.0) -> list[dict]:
    """Up to JOIN_TIMEOUT for NNODES-1 live workers with NUM_GPUS GPUs each; prints each as it joins and
    records them in runs/<RUN>/nodes.json. On timeout: refused, naming what is missing."""
    want, gpus, timeout = cfg.NNODES - 1, cfg.NUM_GPUS, cfg.JOIN_TIMEOUT
    end, seen, workers = time.monotonic() + timeout, set(), []
    # endings already recorded (an earlier attempt's) are not news; compared by value, not by clock:
    # "ended" is the worker's clock, which need not agree with this node's
    told = {w["addr"]: w["ended"] for w in ended_workers(lay)}
    before = dict(told)
    echo(f"waiting up to {timeout:.0f} s (JOIN_TIMEOUT) for {want} worker(s) of {gpus:g} GPUs: "
         f"`make join HEAD_ADDR={cfg.NODE_ADDR}` on each")
    while True:
        found = nodes(cfg, lay)
        workers = [n for n in found if n["alive"] and not n["head"]]
        for n in workers:
            if n["id"] not in seen:
                seen.add(n["id"])
                echo(f"node {n['addr']} joined with {n['gpus']:g} GPU(s)")
        ready = [n for n in workers if n["gpus"] >= gpus]
        if len(ready) >= want:
            break
        joined = {n["addr"] for n in workers}
        ended = [w for w in ended_workers(lay) if w["addr"] not in joined]
        for w in ended:
            if told.get(w["addr"]) != w["ended"]:
                told[w["addr"]] = w["ended"]
                echo(f"worker {w['addr']}'s Ray node ended (exit {w.get('exit')}) without joining: {w['log']} says "
                     f"why; `make join HEAD_ADDR={cfg.NODE_ADDR}` on it starts it again (still waiting)")
        if time.monotonic() >= end:
            short = [f"{n['addr']} has {n['gpus']:g}" for n in workers if n["gpus"] < gpus]
            gone = [f"{w['addr']}'s Ray node ended (exit {w.get('exit')})" for w in ended
                    if before.get(w["addr"]) != w["ended"]]
            raise ToolkitError(
                f"{want - len(ready)} of {want} worker(s) missing after JOIN_TIMEOUT={timeout:g} s: joined "
                f"{', '.join(n['addr'] for n in ready) or 'none'}" + (f"; too few GPUs: {', '.join(short)} "
                f"(NUM_GPUS={gpus:g})" if short else "") + (f"; {', '.join(gone)}" if gone else ""), "JOIN_TIMEOUT",
                f"run `make join HEAD_ADDR={cfg.NODE_ADDR}` on each worker (its log: runs/<RUN>/nodes/<addr>/logs), "
                "or raise JOIN_TIMEOUT")
        time.sleep(poll)
    head = next((n for n in found if n["head"]), None)
    # each worker with the start of its Ray the job is placed on (loop.py tells a replaced node by it)
    workers = [{**n, "ray": ray_generation(lay, n["addr"])} for n in ready]
    write_json_atomic(lay.run_dir / "nodes.json", {"head": head, "workers": workers, "at": time.time()})
    return ready


def ended_workers(lay: RunLayout) -> list[dict]:
    """Workers whose agent wrote that its Ray node ended (node.json's "ended", the worker's time),
    each with the path of its log."""
    return [{**info, "addr": info.get("addr", path.parent.name),
             "log": str(path.parent / "logs" / f"{WORKER_SERVICE}.log")}
            for path, info in worker_records(lay) if "ended" in info]


# How many times in a row a worker may leave the cluster under its storage check (its Ray ended after
# the head counted it, its agent starting it again) before the head stops waiting for it.
STORAGE_LEFT_TRIES = 3


def head_ready(cfg, lay: RunLayout, echo: Callable[[str], None]) -> None:
    """The head's part once its Ray answers: what workers compare with published, workers waited
    for, storage checked on each. A node found wrong is removed and the wait starts again, for a
    right one (it joined before a mount went away; `make join` refuses it now until it is fixed).
    A node that left under its check (its Ray ended; its agent starts it again) is waited for again."""
    _, rec = publish(cfg, lay)
    left_in_a_row = 0
    while True:
        wait_for_workers(cfg, lay, echo)
        wrong, gone = check_storage(cfg, lay, echo, rec)
        if gone:
            left_in_a_row += 1
            _node_left(lay, gone, left_in_a_row, echo)
            continue
        left_in_a_row = 0
        if not wrong:
            return
        for node_id, addr, problem in wrong:
            remove_node(cfg, lay, addr, node_id, problem, echo)


def _node_left(lay: RunLayout, gone: list[tuple[str, str, str]], times: int, echo: Callable[[str], None]) -> None:
    for _node_id, addr, why in gone:
        line = f"node {addr} left the cluster while its storage was checked ({why})"
        if times >= STORAGE_LEFT_TRIES:
            raise ToolkitError(f"{line}: {times} times in a row", addr,
                               f"see why its Ray keeps ending in {node_dir(lay, addr) / 'logs' / f'{WORKER_SERVICE}.log'}, "
                               "fix it there, then `make resume`")
        echo(f"{line}: waiting for the workers again")


def check_storage(cfg, lay: RunLayout, echo: Callable[[str], None],
                  rec: dict) -> tuple[list[tuple[str, str, ToolkitError]], list[tuple[str, str, str]]]:
    """The head's storage record read back on every worker by a task pinned to it: (node id, address,
    the first problem) of each node that does not see it, and (node id, address, Ray's words) of each
    that left the cluster under its task; ([], []) when all see it."""
    seen = probe(cfg, lay, "storage", gcs_address(cfg),
                 stdin=json.dumps({"nonces": sorted(node_storage.nonce_paths(rec)), "hashes": sorted(rec["hashes"])}))["seen"]
    gone = [(got.get("id"), node, got["gone"]) for node, got in sorted(seen.items()) if "gone" in got]
    if gone:
        return [], gone
    wrong = []
    for node, got in sorted(seen.items()):
        found = node_storage.problems_seen(cfg, rec, node, got)
        if found:
            wrong.append((got.get("id"), node, found[0]))
    if not wrong:
        echo(f"shared storage: {len(seen)} worker(s) read the head's nonces under TRAIN_SAVE and the run dir, and "
             f"the same {len(rec['hashes'])} input file(s)")
    return wrong, []


def leave_marker(lay: RunLayout, addr: str) -> Path:
    """Written by the head in a worker's own directory to remove it; its agent watches it, `make join` clears it."""
    return node_dir(lay, addr) / "leave.json"


def tell_to_leave(lay: RunLayout, addr: str, node_id: str | None, reason: str) -> None:
    write_json_atomic(leave_marker(lay, addr), {"reason": reason, "node_id": node_id})


def remove_node(cfg, lay: RunLayout, addr: str, node_id: str | None, problem: ToolkitError,
                echo: Callable[[str], None], poll: float = 2.0) -> None:
    """A joined node found wrong leaves the run, not the run itself: told to leave (the head cannot
    signal another machine; its agent stops its Ray node), then awaited out of Ray's live nodes for
    up to JOIN_TIMEOUT, so that no job is placed on it. Raises, naming the node and `make leave`,
    when it stays."""
    tell_to_leave(lay, addr, node_id, problem.what)
    events.append(lay.run_dir, "node-removed", node=addr, node_id=node_id, reason=problem.what)
    echo(f"node {addr} removed from the run: {problem.what}; its agent stops its Ray node (fix there: {problem.fix})")
    end = time.monotonic() + cfg.JOIN_TIMEOUT
    while any(n["id"] == node_id and n["alive"] for n in nodes(cfg, lay)):
        if time.monotonic() >= end:
            raise ToolkitError(f"{problem.what}; told to leave, it did not leave the cluster within "
                               f"JOIN_TIMEOUT={cfg.JOIN_TIMEOUT:g} s (its agent does not see "
                               f"{leave_marker(lay, addr)})", problem.where,
                               f"`make leave` on {addr}; {problem.fix}; then `make resume`")
        time.sleep(poll)
