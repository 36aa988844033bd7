"""What `make join` checks before a worker enters the run's cluster, and what the head does with a
node found wrong later (docs/multinode.md §5, §6): decided here without a second machine. The head's
Ray is a stand-in for node_probe's answers (its GCS store, its node list, what a task pinned to a node
reads there); the files are real. tests/test_two_node_joins.py runs the same checks on a real two-node
Ray cluster.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from pyhelpers.errors import ToolkitError
from pyhelpers.launch import cluster, join_checks, node_agent, node_storage

HEAD, WORKER, OTHER = "198.51.100.1", "198.51.100.2", "198.51.100.3"
VERSIONS = {"python": "3.12.8", "ray": "2.60.0", "slime": None, "sglang": "0.5.15.post1", "megatron-core": "0.16.0rc0"}


def _configs(toolkit_env, **worker):
    """(head's, worker's) configuration of one NNODES=2 run, without two machines (config.load checks
    NODE_ADDR against this machine's addresses: the values are put in afterwards)."""
    from pyhelpers.config import load

    base = load.load({**toolkit_env})
    two = {"NNODES": "2", "JOIN_TIMEOUT": "600"}
    head = replace(base, values={**base.values, **two, "NODE_ADDR": HEAD})
    mine = replace(base, values={**base.values, **two, "NODE_ADDR": WORKER, "HEAD_ADDR": HEAD, **worker})
    return head, mine


def _layout(cfg):
    from pyhelpers.run.layout import from_config

    return from_config(cfg)


def _token(lay) -> Path:
    from pyhelpers.launch import ray_auth

    return ray_auth.ensure_token(lay.run_dir)


class FakeHead:
    """The head's Ray as launch/node_probe.py answers for it: its GCS store (what `kv-put` stored), its
    nodes, and what a task pinned to each worker reads there (the real files, unless `reads` says
    otherwise for a node). A node whose leave marker the head wrote is gone at the next look, as its
    agent would take it out; `rejoin` brings it back under a new node id, read right this time."""

    def __init__(self, lay, workers=(), rejoin=False):
        self.lay, self.kv, self.rejoin = lay, {}, rejoin
        self.leave_in_storage: list[str] = []  # nodes whose Ray ends while their storage task is pending
        self.nodes = [{"id": "head", "addr": HEAD, "alive": True, "gpus": 4.0, "head": True}]
        self.nodes += [{"id": f"id-{a}", "addr": a, "alive": True, "gpus": 4.0, "head": False} for a in workers]
        self.reads: dict[str, dict[str, str]] = {}  # node addr -> path -> what it reads there
        self.asked: list[str] = []

    def probe(self, cfg, lay, *args, stdin="", timeout=180):
        cmd = args[0]
        self.asked.append(cmd)
        if cmd == "versions":
            return dict(VERSIONS)
        if cmd == "kv-put":
            self.kv[args[2]] = stdin
            return {"stored": args[2]}
        if cmd == "kv-get":
            return {"value": self.kv.get(args[2])}
        self._leave()
        alive = [n for n in self.nodes if n["alive"]]
        if cmd == "joining":
            return {"versions": dict(VERSIONS), "value": self.kv.get(args[2]),
                    "members": [{"id": n["id"], "addr": n["addr"], "gpus": n["gpus"], "head": n["head"]}
                                for n in alive]}
        if cmd == "nodes":
            return {"nodes": [dict(n) for n in self.nodes]}
        if cmd == "storage":
            want = json.loads(stdin)
            if self.leave_in_storage:  # node_probe.storage's answer for a node gone under its task
                addr = self.leave_in_storage.pop(0)
                n = next(n for n in self.nodes if n["addr"] == addr and n["alive"])
                n["alive"] = False
                self.nodes.append({**n, "id": n["id"] + "-again", "alive": True})  # its agent starts Ray again
                return {"seen": {addr: {"id": n["id"], "gone": "TaskUnschedulableError: The node specified via "
                                        "NodeAffinitySchedulingStrategy doesn't exist any more"}}}
            return {"seen": {n["addr"]: {"id": n["id"], "nonces": {p: self._read(n["addr"], p) for p in want["nonces"]},
                                         "hashes": {p: node_storage.sha256(Path(p)) for p in want["hashes"]}}
                             for n in alive if not n["head"]}}
        raise AssertionError(f"unexpected probe {args}")

    def _read(self, addr: str, path: str) -> str:
        return self.reads.get(addr, {}).get(path) or Path(path).read_text()

    def _leave(self) -> None:
        for n in list(self.nodes):
            if n["alive"] and not n["head"] and cluster.leave_marker(self.lay, n["addr"]).is_file():
                n["alive"] = False
                if self.rejoin:  # fixed and joined again: a new Ray node at the same address
                    self.reads.pop(n["addr"], None)
                    self.nodes.append({**n, "id": n["id"] + "-again", "alive": True})
                    cluster.leave_marker(self.lay, n["addr"]).unlink()  # (make join clears it)


@pytest.fixture
def head_and_worker(toolkit_env, monkeypatch):
    def make(workers=(), rejoin=False, **worker):
        hcfg, wcfg = _configs(toolkit_env, **worker)
        lay = _layout(hcfg)
        _token(lay)
        fake = FakeHead(lay, workers, rejoin=rejoin)
        monkeypatch.setattr(cluster, "probe", fake.probe)
        return SimpleNamespace(hcfg=hcfg, wcfg=wcfg, lay=lay, wlay=_layout(wcfg), fake=fake, monkeypatch=monkeypatch)
    return make


def _publish(w) -> None:
    """What the head publishes once its Ray is up (`pyhelpers node publish`, the train stage's first step)."""
    from pyhelpers.cli import node_cmd

    with w.monkeypatch.context() as m:
        m.setattr(node_cmd, "ctx", lambda: (w.hcfg, w.lay))
        node_cmd.node_publish.callback()


def test_a_worker_that_shares_the_heads_storage_passes_the_join_checks(head_and_worker):
    w = head_and_worker()
    _publish(w)
    said: list[str] = []
    join_checks.join_checks(w.wcfg, w.wlay, said.append)
    assert any(line.startswith("versions match the head") for line in said), said
    assert any("shared storage" in line and "TRAIN_SAVE" in line for line in said), said


def test_a_worker_whose_train_save_is_another_directory_is_refused_at_join(head_and_worker, tmp_path):
    w = head_and_worker(TRAIN_SAVE=str(tmp_path / "elsewhere"))
    _publish(w)
    with pytest.raises(ToolkitError) as err:
        join_checks.join_checks(w.wcfg, w.wlay, lambda line: None)
    assert "TRAIN_SAVE" in err.value.what and str(w.hcfg.save_dir) in err.value.what, err.value.what
    assert str(w.wcfg.save_dir) in err.value.what and "make join" in err.value.fix, err.value


def test_a_worker_that_reads_other_bytes_at_train_saves_path_is_refused_at_join(head_and_worker):
    """The same path, another disk there (a local directory where the head's NFS mount should be):
    the nonce the head wrote is not what this node reads."""
    w = head_and_worker()
    _publish(w)
    nonce = w.hcfg.save_dir / node_storage.NONCE_NAME
    nonce.write_text("what a local disk holds")  # as this worker sees it; the head's KV holds the real one
    with pytest.raises(ToolkitError) as err:
        join_checks.join_checks(w.wcfg, w.wlay, lambda line: None)
    assert f"this worker does not share TRAIN_SAVE: it reads {nonce} as what a loca" in err.value.what, err.value.what
    assert "mount the head's TRAIN_SAVE" in err.value.fix, err.value.fix


def test_a_node_beyond_nnodes_is_refused_at_join_with_one_line(head_and_worker):
    w = head_and_worker(workers=[OTHER])
    _publish(w)
    with pytest.raises(ToolkitError) as err:
        join_checks.join_checks(w.wcfg, w.wlay, lambda line: None)
    text = f"{err.value.what} {err.value.fix}"
    assert "\n" not in text
    assert f"already has its 1 worker(s) ({OTHER})" in err.value.what and "NNODES=2" in err.value.what, text


def test_the_workers_own_earlier_ray_node_does_not_count_against_it(head_and_worker):
    """Its raylet killed, Ray may still list the lost node for a while: the rejoin is not one too many."""
    w = head_and_worker(workers=[WORKER])
    _publish(w)
    join_checks.join_checks(w.wcfg, w.wlay, lambda line: None)


def test_a_node_found_wrong_at_a_later_round_is_removed_and_the_run_goes_on(head_and_worker):
    """At a round's start the head finds a joined worker that no longer reads the head's TRAIN_SAVE (its
    mount gone): that node is told to leave and awaited out of the cluster, and the run waits for a
    right one (here the same machine, fixed and joined again) instead of stopping for good."""
    w = head_and_worker(workers=[WORKER], rejoin=True)
    w.fake.reads[WORKER] = {str(w.hcfg.save_dir / node_storage.NONCE_NAME): "unreadable: No such file or directory"}
    said: list[str] = []
    cluster.head_ready(w.hcfg, w.lay, said.append)
    removed = [line for line in said if f"node {WORKER} removed from the run" in line]
    assert len(removed) == 1 and "does not share TRAIN_SAVE" in removed[0], said
    assert any("shared storage: 1 worker(s)" in line for line in said), said
    joined = json.loads((w.lay.run_dir / "nodes.json").read_text())["workers"]
    assert [n["id"] for n in joined] == [f"id-{WORKER}-again"], joined
    from pyhelpers.overview import manifest, status

    manifest.record_or_compare(w.hcfg, w.lay.manifest)  # (a started run)
    shown = [line for line in status.render(status.gather(w.hcfg, w.lay)) if line.startswith("removed:")]
    assert len(shown) == 1 and f"node-removed {WORKER} node {WORKER} does not share TRAIN_SAVE" in shown[0], shown


def test_a_node_whose_ray_ends_under_its_storage_check_is_waited_for_again_not_taken_for_a_failure(head_and_worker):
    """A worker whose Ray ends between the wait for the workers and the storage check (its agent starts
    it again: a new node id) is waited for again and checked anew; CI once stopped a healthy two-node run
    here, reading Ray's "node ... doesn't exist any more" as the same failure twice."""
    w = head_and_worker(workers=[WORKER])
    w.fake.leave_in_storage = [WORKER]
    said: list[str] = []
    cluster.head_ready(w.hcfg, w.lay, said.append)
    left = [line for line in said if f"node {WORKER} left the cluster while its storage was checked" in line]
    assert len(left) == 1 and "TaskUnschedulableError" in left[0] and "waiting for the workers again" in left[0], said
    assert any("shared storage: 1 worker(s)" in line for line in said), said
    joined = json.loads((w.lay.run_dir / "nodes.json").read_text())["workers"]
    assert [n["id"] for n in joined] == [f"id-{WORKER}-again"], joined
    assert not cluster.leave_marker(w.lay, WORKER).exists()  # nothing wrong with it: not removed


def test_a_node_that_keeps_leaving_under_its_storage_check_stops_the_wait_naming_it(head_and_worker):
    w = head_and_worker(workers=[WORKER])
    w.fake.leave_in_storage = [WORKER] * (cluster.STORAGE_LEFT_TRIES + 1)
    with pytest.raises(ToolkitError) as err:
        cluster.head_ready(w.hcfg, w.lay, lambda line: None)
    assert f"node {WORKER} left the cluster" in err.value.what and f"{cluster.STORAGE_LEFT_TRIES} times" in err.value.what
    assert "ray-worker.log" in err.value.fix, err.value


NODE_ID = "ab" * 28  # Ray's node ids: 28 bytes of hex (NodeAffinitySchedulingStrategy checks it)


class _PinnedRay:
    """node_probe's `ray` for storage(): one other node, whose pinned task raises `error` at ray.get
    (after which Ray lists that node as `alive_after`), or answers."""

    def __init__(self, error: BaseException | None, alive_after: bool):
        self.error, self.alive_after, self.got = error, alive_after, False

    def get_runtime_context(self):
        return SimpleNamespace(get_node_id=lambda: "head-id")

    def nodes(self):
        alive = not self.got or self.alive_after
        return [{"NodeID": "head-id", "Alive": True, "NodeManagerAddress": HEAD},
                {"NodeID": NODE_ID, "Alive": alive, "NodeManagerAddress": WORKER}]

    def remote(self, **_):
        return lambda fn: SimpleNamespace(options=lambda **_: SimpleNamespace(remote=lambda *a: "ref"))

    def get(self, ref, timeout=None):
        self.got = True
        if self.error is not None:
            raise self.error
        return {"nonces": {}, "hashes": {}}


def test_the_storage_probe_answers_gone_for_a_node_that_left_under_its_task_and_fails_otherwise(monkeypatch):
    """launch/node_probe.py storage: a pinned task whose node left the cluster (Ray's
    TaskUnschedulableError, or any failure once Ray lists the node dead) is that node's "gone", not
    the probe's error; a failure on a node still alive stays an error."""
    from ray.exceptions import GetTimeoutError, TaskUnschedulableError

    from pyhelpers.launch import node_probe

    for error, alive_after, gone in ((TaskUnschedulableError("The node specified via NodeAffinitySchedulingStrategy "
                                                             "doesn't exist any more"), True, True),
                                     (GetTimeoutError("timed out"), False, True),
                                     (GetTimeoutError("timed out"), True, False)):
        fake = _PinnedRay(error, alive_after)
        monkeypatch.setattr(node_probe, "_connect", lambda addr, fake=fake: fake)
        if gone:
            seen = node_probe.storage("gcs", {"nonces": [], "hashes": []})["seen"]
            assert seen[WORKER]["id"] == NODE_ID and seen[WORKER]["gone"].startswith(type(error).__name__), seen
        else:
            with pytest.raises(GetTimeoutError):
                node_probe.storage("gcs", {"nonces": [], "hashes": []})
    monkeypatch.setattr(node_probe, "_connect", lambda addr: _PinnedRay(None, True))
    assert node_probe.storage("gcs", {"nonces": [], "hashes": []}) == {"seen": {WORKER: {"nonces": {}, "hashes": {},
                                                                                         "id": NODE_ID}}}


def test_a_removed_node_is_stopped_by_its_own_agent(head_and_worker):
    """The head cannot signal another machine: it leaves a marker in the node's own directory of the
    shared run dir, which that node's agent watches, as it watches the run's stop marker."""
    w = head_and_worker()
    stop = node_agent.stop_watch(w.wlay, WORKER)
    assert stop() is None
    cluster.tell_to_leave(w.lay, WORKER, "id-x", "it does not share TRAIN_SAVE")
    assert stop() == "the head removed this node: it does not share TRAIN_SAVE"


def test_a_wrong_node_that_does_not_leave_is_named_with_the_command_that_stops_it(head_and_worker):
    w = head_and_worker(workers=[WORKER])
    w.hcfg = replace(w.hcfg, values={**w.hcfg.values, "JOIN_TIMEOUT": "1"})
    w.fake._leave = lambda: None  # its agent does not see the marker (its run dir is not the head's either)
    w.fake.reads[WORKER] = {str(w.hcfg.save_dir / node_storage.NONCE_NAME): "unreadable: No such file or directory"}
    with pytest.raises(ToolkitError) as err:
        cluster.head_ready(w.hcfg, w.lay, lambda line: None)
    assert f"node {WORKER} does not share TRAIN_SAVE" in err.value.what and "did not leave" in err.value.what
    assert "make leave" in err.value.fix, err.value


def _no_waiting(monkeypatch):
    def sleep(s):
        raise AssertionError(f"make join waited ({s} s) instead of refusing at once")
    monkeypatch.setattr(join_checks, "time", SimpleNamespace(monotonic=time.monotonic, time=time.time, sleep=sleep))


def test_a_named_token_file_that_is_missing_is_refused_at_once(head_and_worker, tmp_path, monkeypatch):
    missing = tmp_path / "copy-of-the-token"
    w = head_and_worker(RAY_TOKEN_FILE=str(missing))
    _no_waiting(monkeypatch)
    with pytest.raises(ToolkitError) as err:
        join_checks.join_checks(w.wcfg, w.wlay, lambda line: None)
    assert err.value.what.startswith(f"no Ray token at {missing}"), err.value.what
    assert "RAY_TOKEN_FILE" in err.value.fix and "auth-token" in err.value.fix, err.value.fix


def test_no_token_while_the_heads_ray_answers_is_refused_at_once(head_and_worker, monkeypatch):
    """The head's Ray is up (its token was written before it started), and this node does not see the
    token in its run dir: its RUNS_DIR is not the head's. Waiting would change nothing."""
    with socket.socket() as gcs:
        gcs.bind(("127.0.0.1", 0))
        gcs.listen()
        w = head_and_worker(HEAD_ADDR="127.0.0.1", RAY_PORT=str(gcs.getsockname()[1]))
        tok = cluster.token_path(w.wcfg, w.wlay)
        tok.unlink()
        _no_waiting(monkeypatch)
        with pytest.raises(ToolkitError) as err:
            join_checks.join_checks(w.wcfg, w.wlay, lambda line: None)
    assert err.value.what.startswith(f"no Ray token at {tok}"), err.value.what
    assert "answers" in err.value.what and "RAY_TOKEN_FILE" in err.value.fix, err.value


def test_no_token_and_no_head_names_the_token_first_after_join_timeout(head_and_worker):
    """A worker started before the head waits for it (its token appears with its Ray); in the end the
    missing token is named first, the head second."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        w = head_and_worker(HEAD_ADDR="127.0.0.1", RAY_PORT=str(closed.getsockname()[1]), JOIN_TIMEOUT="0.5")
        tok = cluster.token_path(w.wcfg, w.wlay)
        tok.unlink()
        with pytest.raises(ToolkitError) as err:
            join_checks._head_versions(w.wcfg, w.wlay, lambda line: None, poll=0.1)
    assert err.value.what.startswith(f"no Ray token at {tok} after JOIN_TIMEOUT=0.5 s"), err.value.what
    assert "no head of this run answered" in err.value.what, err.value.what


def test_a_stale_workers_rejoin_is_refused_at_once_naming_make_leave(head_and_worker, monkeypatch):
    """Its ray-worker service still runs (a join before this one): on a worker the command that stops
    it is `make leave` (`make stop` is the head's), and nothing is asked of the head first."""
    from pyhelpers.cli import node_cmd
    from pyhelpers.procs import groups

    w = head_and_worker(DOCTOR_PROFILE="rehearse")
    _publish(w)
    w.fake.asked.clear()
    _no_waiting(monkeypatch)
    pids, logs = node_cmd._dirs(w.wcfg, w.wlay)
    groups.start(cluster.WORKER_SERVICE, ["sleep", "300"], pids_dir=pids, logs_dir=logs)
    monkeypatch.setattr(node_cmd, "ctx", lambda: (w.wcfg, w.wlay))
    try:
        with pytest.raises(ToolkitError) as err:
            node_cmd.node_join.callback()
    finally:
        groups.stop_all(pids, 1.0, names=[cluster.WORKER_SERVICE], missing_ok=True)
    assert "already running" in err.value.what and "make leave" in err.value.fix, err.value
    assert "make stop" not in err.value.fix, err.value.fix
    assert w.fake.asked == [], f"the head was asked first: {w.fake.asked}"


def test_the_head_publishes_its_storage_before_its_versions(head_and_worker):
    """A worker that finds the head's versions finds its storage record too (no window between them)."""
    w = head_and_worker()
    order = []
    put = w.fake.probe

    def recording(cfg, lay, *args, **kw):
        if args[0] == "kv-put":
            order.append(args[2])
        return put(cfg, lay, *args, **kw)
    w.monkeypatch.setattr(cluster, "probe", recording)
    _publish(w)
    assert order == [node_storage.STORAGE_KEY, cluster.VERSIONS_KEY], order
    assert os.stat(w.hcfg.save_dir / node_storage.NONCE_NAME).st_size


def test_a_token_replaced_while_its_probe_ran_is_read_again_not_taken_as_refused(head_and_worker, monkeypatch):
    """The next two-node rehearsal after a killed one: the worker read the killed run's token, its
    `ray` probe took seconds to start on a loaded machine, and meanwhile the head wrote the new run's
    token and started its Ray with it. Ray refused the old token, and `make join` failed as if this
    node lacked the token (the run then waited JOIN_TIMEOUT for a worker that had given up). A refusal
    is final only for the token that is still the run's: one replaced during the probe is read again."""
    w = head_and_worker()
    _publish(w)
    tok = cluster.token_path(w.wcfg, w.wlay)
    answer = w.fake.probe
    calls = []

    def probe(cfg, lay, verb, *args, **kwargs):
        if verb == "kv-get" and not calls:
            calls.append(tok.read_bytes())
            tok.write_bytes(b"the-new-runs-token")  # the head's new run, while this probe ran
            raise ToolkitError("Ray refused `kv-get`: AuthenticationError: RPC error: InvalidAuthToken: "
                               "Authentication token is missing or incorrect.", "x", "y")
        return answer(cfg, lay, verb, *args, **kwargs)

    monkeypatch.setattr(cluster, "probe", probe)
    said: list[str] = []
    join_checks.join_checks(w.wcfg, w.wlay, said.append)
    assert calls and calls[0] != tok.read_bytes(), calls
    assert any(line.startswith("versions match the head") for line in said), said
