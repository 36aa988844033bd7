"""A worker's checks before it joins a run across NNODES machines (`make join`, docs/multinode.md §5), in
this order: its settings, the run's Ray token (waiting up to JOIN_TIMEOUT for a head not up yet), the
head's versions against its own, room for one more worker in the cluster, and the head's shared storage
as this node sees it (node_storage.problems_here). Every question goes to the head's Ray through
cluster.probe, which the head's side (cluster.py) shares.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from pyhelpers.errors import ToolkitError
from pyhelpers.launch import cluster, node_storage
from pyhelpers.procs import ready
from pyhelpers.run.layout import RunLayout

# NFS caches a file's absence for up to acdirmax (60 s by default): a worker that looked for the token
# before the head wrote it may not see it for that long after the head's Ray came up
TOKEN_LAG_S = 60.0


def differences(head: dict, mine: dict) -> list[str]:
    """'NAME: head X, this worker Y' for each compared version that differs."""
    return [f"{name}: head {head.get(name) or 'missing'}, this worker {mine.get(name) or 'missing'}"
            for name in cluster.COMPARED if head.get(name) != mine.get(name)]


def join_checks(cfg, lay: RunLayout, echo: Callable[[str], None]) -> None:
    """A worker's checks before it enters the cluster: settings, the token file, the head's versions
    (read from the head's GCS: a wrong token is refused there, by Ray), room for one more worker,
    the head's storage seen here (node_storage.problems_here)."""
    if not cfg.multinode:
        raise ToolkitError(f"NNODES={cfg.NNODES}: a one-node run has no workers", "NNODES",
                           "set NNODES to the number of machines (the head's value) in this worker's .env")
    if not cfg.HEAD_ADDR:
        raise ToolkitError("make join needs HEAD_ADDR, the head's NODE_ADDR", "HEAD_ADDR",
                           "set HEAD_ADDR in .env, or `make join HEAD_ADDR=…`")
    if cfg.HEAD_ADDR == cfg.NODE_ADDR:
        raise ToolkitError(f"HEAD_ADDR={cfg.HEAD_ADDR} is this machine's NODE_ADDR", "HEAD_ADDR",
                           "run `make join` on a worker; the head runs `make train`")
    raw = _head_versions(cfg, lay, echo)
    # one start of the slime env's interpreter for the rest (a loaded node takes seconds for each)
    view = cluster.probe(cfg, lay, "joining", cluster.gcs_address(cfg, head=False), node_storage.STORAGE_KEY)
    head, mine = json.loads(raw), {"toolkit": cluster.toolkit_commit(cfg.root), **view["versions"]}
    if diff := differences(head, mine):
        raise ToolkitError("this worker's versions differ from the head's: " + "; ".join(diff), "make join",
                           "install the head's versions here (the same toolkit commit: git checkout; the slime env: "
                           "the same system image or env/conda/slime.yml), then `make join` again")
    echo("versions match the head: " + ", ".join(f"{k} {mine.get(k)}" for k in cluster.COMPARED))
    if "error" in view:
        raise ToolkitError(f"Ray refused `joining`: {view['error']}", cluster.gcs_address(cfg, head=False),
                           cluster.refusal_fix(view["error"]))
    _check_room(cfg, view["members"])
    _check_storage_here(cfg, lay, echo, view["value"])


def _check_room(cfg, members: list[dict]) -> None:
    """Refused when the cluster already holds NNODES-1 live workers of NUM_GPUS GPUs (this machine's
    own earlier node aside: Ray may list a lost node a while longer)."""
    want = cfg.NNODES - 1
    others = sorted(n["addr"] for n in members
                    if not n["head"] and n["addr"] != cfg.NODE_ADDR and n["gpus"] >= cfg.NUM_GPUS)
    if len(others) >= want:
        raise ToolkitError(f"the run's cluster already has its {want} worker(s) ({', '.join(others)}) for "
                           f"NNODES={cfg.NNODES}: this node would be one too many", "NNODES",
                           "`make leave` on the worker this one replaces, or raise NNODES on every node and "
                           "`make resume` on the head")


def _check_storage_here(cfg, lay: RunLayout, echo: Callable[[str], None], raw: str | None, tries: int = 3) -> None:
    """The head's storage record (`raw`, as read) against this node's view; a record the head
    replaced meanwhile (it writes fresh nonces at each round's start) is read again."""
    for _ in range(tries):
        rec = json.loads(raw or '{"dirs": {}, "hashes": {}}')
        found = node_storage.problems_here(cfg, lay, rec)
        if not found:
            echo(f"shared storage: this worker reads the head's nonces under TRAIN_SAVE and the run dir (both "
                 f"writable here) and the same {len(rec['hashes'])} input file(s)")
            return
        again = cluster.probe(cfg, lay, "kv-get", cluster.gcs_address(cfg, head=False),
                              node_storage.STORAGE_KEY)["value"]
        if again == raw:
            break
        raw = again
    raise found[0]


NO_TOKEN_FIX = ("share RUNS_DIR with the head at the same path (the token is runs/<RUN>/ray/auth-token there), or "
                "copy that file here (mode 0600) and name it with RAY_TOKEN_FILE; then `make join`")


def _same_token(tok: Path, sent: bytes) -> bool:
    try:
        return tok.read_bytes() == sent
    except OSError:
        return False


def _head_versions(cfg, lay: RunLayout, echo: Callable[[str], None], poll: float = 3.0) -> str:
    """The head's published versions, waiting up to JOIN_TIMEOUT for a head that is not up yet (a
    worker may be started first). Refused at once: a refused token (Ray's answer is final), a missing
    RAY_TOKEN_FILE, and no token while the head's Ray answers (its token was written before it
    started: this node does not see it; TOKEN_LAG_S when the head came up during the wait)."""
    addr, timeout = cluster.gcs_address(cfg, head=False), cfg.JOIN_TIMEOUT
    end, said = time.monotonic() + timeout, False
    tok = cluster.token_path(cfg, lay)
    first, head_up = True, None  # head_up: when the head's GCS port first took a connection
    while True:
        raw, why = None, ""
        if not tok.is_file() or not tok.stat().st_size:
            if cfg.RAY_TOKEN_FILE:
                raise ToolkitError(f"no Ray token at {tok} (RAY_TOKEN_FILE)", "RAY_TOKEN_FILE",
                                   f"copy the head's runs/<RUN>/ray/auth-token to {tok} (mode 0600), or set "
                                   "RAY_TOKEN_FILE to where the copy is; then `make join`")
            if ready.tcp_probe(cfg.HEAD_ADDR, cfg.RAY_PORT)()[0]:
                head_up = time.monotonic() if head_up is None else head_up
                if first or time.monotonic() - head_up >= TOKEN_LAG_S:
                    raise ToolkitError(f"no Ray token at {tok}, though the head's Ray answers at {addr}: this node "
                                       "does not see the head's run dir", str(tok), NO_TOKEN_FIX)
            why = "no token"
        elif tok.stat().st_mode & 0o077:
            raise ToolkitError(f"the Ray token {tok} is readable by others (mode {tok.stat().st_mode & 0o777:o})",
                               str(tok), f"chmod 600 {tok}")
        else:
            sent = tok.read_bytes()
            try:
                raw = cluster.probe(cfg, lay, "kv-get", addr, cluster.VERSIONS_KEY,
                                    timeout=max(timeout, 30))["value"]
            except ToolkitError as exc:
                # Final only for the token that is still the run's: the head of a new run (the next
                # rehearsal after a killed one) may replace it while this probe's `ray` starts.
                if cluster.is_auth_refusal(str(exc)) and _same_token(tok, sent):
                    raise
                why = str(exc)
        if raw is not None:
            return raw
        first = False
        if time.monotonic() >= end and why == "no token":
            raise ToolkitError(f"no Ray token at {tok} after JOIN_TIMEOUT={timeout:g} s, and "
                               + (f"no head of this run answered at {addr}" if head_up is None else
                                  f"the head's Ray answers at {addr}"), str(tok),
                               "start the run on the head first (make train with NNODES>1); " + NO_TOKEN_FIX)
        if time.monotonic() >= end:
            raise ToolkitError(f"no head of this run answered at {addr} within JOIN_TIMEOUT={timeout:g} s"
                               + (f" ({why})" if why else " (its Ray is up but holds no versions of this run)"),
                               "HEAD_ADDR", "start the run on the head first (make train with NNODES>1), and check "
                               "HEAD_ADDR and that RAY_PORT is open between the nodes (docs/multinode.md §3)")
        if not said:
            echo(f"waiting up to {timeout:g} s (JOIN_TIMEOUT) for the run's head at {addr}")
            said = True
        time.sleep(poll)
