"""The multi-node questions asked of Ray, run under the slime env's own interpreter (docs/multinode.md).

    python3 node_probe.py versions                  this node's python, ray, sglang, slime, megatron-core
    python3 node_probe.py kv-put ADDR KEY < JSON    store JSON in the cluster's GCS (the head's versions)
    python3 node_probe.py kv-get ADDR KEY           read it back (a worker, before it starts anything)
    python3 node_probe.py nodes ADDR                the cluster's nodes: id, address, alive, GPUs, head
    python3 node_probe.py joining ADDR KEY          what a joining worker compares, in one start of this
                                                    interpreter: this node's versions, KEY's value and the
                                                    live nodes, from the GCS alone (no driver: the worker's
                                                    own node does not exist yet)
    python3 node_probe.py storage ADDR < JSON       on each other node, a task pinned to it reads files back
    python3 node_probe.py clocks ADDR               each other node's clock, read between two of this one's

ADDR is the GCS (NODE_ADDR:RAY_PORT). Stdlib and ray only, no pyhelpers: it runs where only the slime
env exists (versions must be the env's, and a Ray driver must run the cluster's own Python). The
token reaches Ray through RAY_AUTH_MODE / RAY_AUTH_TOKEN_PATH in the environment (launch/ray_auth.py),
never argv. It prints one line: MARKER + JSON; a refusal prints MARKER + {"error": ...} and exits 3.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
import time
from importlib import metadata

MARKER = "SHOPSIMRL_NODE "
NAMESPACE = b"shopsimrl"
DISTS = ("ray", "sglang", "slime", "megatron-core")


def _say(obj) -> None:
    sys.stdout.write(MARKER + json.dumps(obj, sort_keys=True) + "\n")
    sys.stdout.flush()


def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in DISTS:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _gcs(addr: str):
    from ray._raylet import GcsClient  # local: ray exists only in the slime env this file runs in

    return GcsClient(address=addr)


def kv_put(addr: str, key: str, value: str) -> dict:
    _gcs(addr).internal_kv_put(key.encode(), value.encode(), True, NAMESPACE)
    return {"stored": key}


def kv_get(addr: str, key: str) -> dict:
    raw = _gcs(addr).internal_kv_get(key.encode(), NAMESPACE)
    return {"value": None if raw is None else raw.decode()}


def _members(addr: str) -> list[dict]:
    return [{k: v for k, v in n.items() if k != "alive"} for n in nodes(addr)["nodes"] if n["alive"]]


def joining(addr: str, key: str) -> dict:
    """This node's versions first: a GCS of another Ray version may answer the rest with an error,
    which is returned beside them (the versions' difference is the message to give)."""
    out = {"versions": versions()}
    try:
        out.update(value=kv_get(addr, key)["value"], members=_members(addr))
    except Exception as exc:  # noqa: BLE001 -- named by the caller after the versions compared equal
        out["error"] = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
    return out


def _connect(addr: str):
    import logging  # local: with ray below, only when a Ray driver is needed

    import ray  # local: ray exists only in the slime env this file runs in

    ray.init(address=addr, logging_level=logging.ERROR, log_to_driver=False, include_dashboard=False)
    return ray


def nodes(addr: str) -> dict:
    """Every node the GCS knows, alive or not, from the GCS alone: asked every 2 s while the head waits
    for its workers, where a Ray driver's start (ray.init) took a second or two of wall time each."""
    from ray.core.generated import gcs_pb2  # local: ray exists only in the slime env this file runs in

    infos = _gcs(addr).get_all_node_info(timeout=30)
    return {"nodes": [{"id": nid.hex(), "addr": n.node_manager_address, "alive": n.state == gcs_pb2.GcsNodeInfo.ALIVE,
                       "gpus": dict(n.resources_total).get("GPU", 0), "head": bool(n.is_head_node)}
                      for nid, n in infos.items()]}


def _read_back(nonces: dict, hashes: dict) -> dict:
    """On the node it is pinned to: each nonce file's text and each input's SHA-256 as seen there."""
    import socket  # local: this function runs as a Ray task on the node it is pinned to

    def sha(path):
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()

    def attempt(fn, path):
        try:
            return fn(path)
        except OSError as exc:
            return f"unreadable: {exc.strerror or exc}"

    return {"host": socket.gethostname(),
            "nonces": {p: attempt(lambda q: open(q).read(), p) for p in nonces},
            "hashes": {p: attempt(sha, p) for p in hashes}}


def _others(ray) -> list[dict]:
    """The live nodes other than this driver's."""
    here = ray.get_runtime_context().get_node_id()
    return [n for n in ray.nodes() if n["Alive"] and n["NodeID"] != here]


def _pinned(ray, fn, node_id: str):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # local: ray, slime env only

    return ray.remote(num_cpus=0)(fn).options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False))


def storage(addr: str, want: dict) -> dict:
    """What a task pinned to each other node read there; {"id", "gone"} for a node that left the
    cluster under its task (its Ray ended after the head counted it): the head waits for the workers
    again instead of failing (cluster.head_ready)."""
    ray = _connect(addr)
    refs = {n["NodeManagerAddress"]: (n["NodeID"], _pinned(ray, _read_back, n["NodeID"]).remote(want["nonces"], want["hashes"]))
            for n in _others(ray)}
    seen = {}
    for node, (nid, ref) in refs.items():
        try:
            seen[node] = {**ray.get(ref, timeout=want.get("timeout", 120)), "id": nid}
        except Exception as exc:  # noqa: BLE001 - which failure it was decides, below
            if not _left(ray, nid, exc):
                raise
            seen[node] = {"id": nid, "gone": _one_line(exc)}
    return {"seen": seen}


def _left(ray, node_id: str, exc: BaseException) -> bool:
    """Whether a task pinned to `node_id` failed because that node left the cluster: Ray says so
    (TaskUnschedulableError, "The node specified via NodeAffinitySchedulingStrategy doesn't exist any
    more"), or the node is no longer alive once the task failed (it died under a running task)."""
    from ray.exceptions import TaskUnschedulableError  # local: ray, slime env only

    return isinstance(exc, TaskUnschedulableError) or not any(
        n["NodeID"] == node_id and n["Alive"] for n in ray.nodes())


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def _now() -> float:
    return time.time()


def clocks(addr: str) -> dict:
    """Each other node's time.time() and this node's just before and after it was read (a worker
    process is made ready there first, so that its start is not inside the interval)."""
    ray = _connect(addr)
    out = {}
    for n in _others(ray):
        task = _pinned(ray, _now, n["NodeID"])
        ray.get(task.remote(), timeout=120)
        before = time.time()
        theirs = ray.get(task.remote(), timeout=120)
        out[n["NodeManagerAddress"]] = {"before": before, "theirs": theirs, "after": time.time()}
    return {"clocks": out}


def main(argv: list[str]) -> int:
    cmd, rest = argv[0], argv[1:]
    try:
        if cmd == "versions":
            out = versions()
        elif cmd == "kv-put":
            out = kv_put(rest[0], rest[1], sys.stdin.read())
        elif cmd == "kv-get":
            out = kv_get(rest[0], rest[1])
        elif cmd == "nodes":
            out = nodes(rest[0])
        elif cmd == "joining":
            out = joining(rest[0], rest[1])
        elif cmd == "storage":
            out = storage(rest[0], json.loads(sys.stdin.read()))
        elif cmd == "clocks":
            out = clocks(rest[0])
        else:
            raise SystemExit(f"unknown command {cmd!r}")
    except Exception as exc:  # every failure is one line for the toolkit to name (a refused token included)
        _say({"error": _one_line(exc)})
        return 3
    _say(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
