"""Workers joining a two-node cluster on one host (docs/multinode.md §5): a head's Ray alone in a
network namespace (NNODES=2, token auth, versions and storage record published), which workers in
the other namespace of the pair try to join: without the run's token, with another Ray version,
without sharing TRAIN_SAVE, and one that shares it (the head's storage check and clock comparison
through a task pinned to it). Needs root and iproute2, as CI has. One module-scoped head serves the
module; a module of its own (not tests/test_two_nodes.py's) so that another xdist worker runs it
beside the two-node rehearsal.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT
from support.rehearsal import Run, pyhelpers_cmd, rehearse_env, stop_leftovers
from support.twonode import REHEARSE, need_root

from pyhelpers.procs import netns

pytestmark = pytest.mark.heavy  # a Ray head and several joins


@pytest.fixture(scope="module")
def head(tmp_path_factory, rehearsal_world):
    need_root()
    tmp = tmp_path_factory.mktemp("two-node-head")
    pair = netns.Pair.create()
    # JOIN_TIMEOUT bounds the one wait that succeeds (the head's node check for a worker that joins); at
    # a load of 20 a worker's Ray took over 60 s to register, and the test failed for its deadline alone
    base = rehearse_env(tmp, rehearsal_world, tracked=False, NNODES=2, JOIN_TIMEOUT=600, RAY_START_TIMEOUT=240)
    head_env = {**base, "NODE_ADDR": pair.head.addr, "NET_IFACE": pair.head.iface}
    worker_env = {**base, "NODE_ADDR": pair.worker.addr, "NET_IFACE": pair.worker.iface, "HEAD_ADDR": pair.head.addr}

    def on(node, env, *cmd, timeout=600):
        return subprocess.run(node.exec_argv([REHEARSE, "--env", *cmd]), env=env, cwd=ROOT, text=True,
                              capture_output=True, timeout=timeout)

    try:
        up = on(pair.head, head_env, *pyhelpers_cmd("run", "service", "ray-head"))
        assert up.returncode == 0, up.stdout + up.stderr
        pub = on(pair.head, head_env, *pyhelpers_cmd("node", "publish"))
        assert pub.returncode == 0, pub.stdout + pub.stderr
        yield {"pair": pair, "head_env": head_env, "worker_env": worker_env, "on": on, "tmp": tmp,
               "run": Run(Path(base["RUNS_DIR"]))}
    finally:
        on(pair.worker, worker_env, str(ROOT / "bin" / "leave"))
        on(pair.head, head_env, *pyhelpers_cmd("run", "cleanup"))
        pair.remove()
        stop_leftovers(base)


def _nothing_started(head) -> None:
    pids = head["run"].run_dir / "nodes" / head["pair"].worker.addr / "pids"
    assert not (pids.is_dir() and any(pids.iterdir())), f"a refused worker started something: {list(pids.iterdir())}"


def test_a_worker_without_the_runs_token_is_refused_by_ray(head):
    other = head["tmp"] / "other-token"
    other.write_text(secrets.token_hex(32))
    other.chmod(0o600)
    r = head["on"](head["pair"].worker, {**head["worker_env"], "RAY_TOKEN_FILE": str(other)}, str(ROOT / "bin" / "join"))
    assert r.returncode != 0
    assert "Ray refused `kv-get`" in r.stderr and "InvalidAuthToken" in r.stderr, r.stderr[-2000:]
    _nothing_started(head)


def test_a_worker_with_another_ray_version_is_refused_naming_both(head, rehearsal_world):
    """The worker's slime env is a copy of the rehearsal's whose interpreter finds a ray 2.59.0
    distribution first (tests/fakes/README.md): the version Ray's metadata reports there."""
    conda = head["tmp"] / "conda-other-ray"
    shutil.copytree(rehearsal_world / "conda", conda, symlinks=True)
    dist = head["tmp"] / "old-ray" / "ray-2.59.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ray\nVersion: 2.59.0\n")
    py = conda / "envs" / "slime" / "bin" / "python3"
    body = py.read_text().replace("exec ", f'export PYTHONPATH="{dist.parent}${{PYTHONPATH:+:$PYTHONPATH}}"\nexec ', 1)
    py.unlink()
    py.write_text(body)
    py.chmod(0o755)
    r = head["on"](head["pair"].worker, head["worker_env"], "env", f"CONDA_ROOT={conda}", str(ROOT / "bin" / "join"))
    assert r.returncode != 0
    assert "ray: head 2.60.0, this worker 2.59.0" in r.stderr, r.stderr[-2000:]
    _nothing_started(head)


def test_a_worker_that_does_not_share_train_save_is_refused_at_join_by_path(head):
    """The worker sees another directory at TRAIN_SAVE's path (a bind mount in its own mount
    namespace, as a node with a local disk there would): `make join` reads the head's nonce there
    before its node enters the cluster, and refuses naming the path."""
    save = head["run"].runs / ".rehearsal" / "train_save"
    save.mkdir(parents=True, exist_ok=True)
    local = head["tmp"] / "worker-local-disk"
    local.mkdir()
    w = head["pair"].worker
    join = subprocess.run(w.exec_argv(["sh", "-c", 'mount --bind "$1" "$2" && shift 2 && exec "$@"', "sh",
                                       str(local), str(save), REHEARSE, "--env", str(ROOT / "bin" / "join")]),
                          env=head["worker_env"], cwd=ROOT, text=True, capture_output=True, timeout=600)
    assert join.returncode != 0, join.stderr[-2000:]
    nonce = save / "rehearsal" / ".node-check"
    assert f"this worker does not share TRAIN_SAVE: it reads {nonce} as unreadable" in join.stderr, join.stderr[-2000:]
    _nothing_started(head)


def test_a_worker_that_shares_the_heads_storage_joins_and_the_head_reads_its_clock(head):
    """The checks at join pass on a real cluster (the head's live nodes read from its GCS, its storage
    record); the head then reads the same storage back through a task pinned to the worker, and
    `make doctor` there compares the worker's clock with its own (one host here: they agree)."""
    w = head["pair"].worker
    join = head["on"](w, head["worker_env"], str(ROOT / "bin" / "join"))
    try:
        assert join.returncode == 0, join.stderr[-3000:]
        assert "shared storage: this worker reads the head's nonces under TRAIN_SAVE and the run dir" in join.stderr
        check = head["on"](head["pair"].head, head["head_env"], *pyhelpers_cmd("node", "check"))
        assert check.returncode == 0, check.stderr[-3000:]
        assert "shared storage: 1 worker(s) read the head's nonces" in check.stderr, check.stderr[-3000:]
        doc = head["on"](head["pair"].head, head["head_env"], *pyhelpers_cmd("doctor", "--json", "--profile", "rehearse"))
        clocks = next(r for r in json.loads(doc.stdout[doc.stdout.index("{"):])["checks"] if r["name"] == "node-clocks")
        assert clocks["status"] == "PASS" and w.addr in clocks["found"], clocks
    finally:
        head["on"](w, head["worker_env"], str(ROOT / "bin" / "leave"))
