"""`pyhelpers node`: a worker machine of a multi-node run (docs/multinode.md §5): join, leave, status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import click

from pyhelpers.cli.common import ctx, echo_err
from pyhelpers.config import ray_ports
from pyhelpers.doctor.base import FAIL, SKIP, Context
from pyhelpers.doctor.gpus import check_gpus
from pyhelpers.errors import ToolkitError
from pyhelpers.launch import cluster, join_checks, node_heartbeats, twonode
from pyhelpers.procs import family, groups, netns, ready

SERVICE = cluster.WORKER_SERVICE
LEAVE = "make leave"  # what stops this worker's own Ray node (`make stop` is the head's)


@click.group()
def node():
    """A worker machine of a run with NNODES > 1."""


def _dirs(cfg, lay):
    mine = cluster.node_dir(lay, cfg.NODE_ADDR)
    return mine / "pids", mine / "logs"


@node.command("join")
def node_join():
    """Check this worker against the run's head (token, versions through Ray, room for one more worker,
    shared storage, GPUs), then start its Ray node bound to NODE_ADDR as service ray-worker and wait
    until it answers.

    \b
    Example:
      pyhelpers node join
    """
    cfg, lay = ctx()
    pids, logs = _dirs(cfg, lay)
    groups.refuse_running(SERVICE, pids, stop_with=LEAVE)  # before the head is asked anything
    join_checks.join_checks(cfg, lay, echo_err)
    _gpus(cfg)
    addr, base = cfg.NODE_ADDR, cfg.RAY_PORT
    ports = [(addr, base + off) for _, _, off in ray_ports.WORKER_BASED]
    cluster.leave_marker(lay, addr).unlink(missing_ok=True)  # a removal by the head before this join is over
    # the keeper (launch/node_keeper.py) runs the node agent and starts it again if it is killed
    rec = groups.start(SERVICE, [sys.executable, "-m", "pyhelpers.launch.node_keeper"], pids_dir=pids, logs_dir=logs,
                      needs_ports=ports, stop_with=LEAVE)
    echo_err(f"{SERVICE}: started (pid {rec.pid}, log {logs / (SERVICE + '.log')}); joining {cluster.gcs_address(cfg, head=False)}")
    took = ready.wait_service(pids, SERVICE, ready.tcp_probe(addr, base + 2), timeout=cfg.RAY_START_TIMEOUT,
                              backoff_max=cfg.READY_BACKOFF_MAX, knob="RAY_START_TIMEOUT")
    echo_err(f"{SERVICE}: this node's raylet answers on {addr}:{base + 2} after {took:.1f} s; the head prints when it "
          "counts it (make status there)")


def _gpus(cfg) -> None:
    """NUM_GPUS GPUs on this worker, as make doctor counts them (the rehearse profile has none to count)."""
    if cfg.DOCTOR_PROFILE == "rehearse":
        echo_err("GPUs: not checked (DOCTOR_PROFILE=rehearse: Ray counts NUM_GPUS logical GPUs)")
        return
    for res in check_gpus(Context(cfg, os.environ, cfg.DOCTOR_PROFILE)):
        if res.status == FAIL:
            raise ToolkitError(f"GPUs: {res.message}", "NUM_GPUS", res.fix)
        if res.status != SKIP:
            echo_err(f"GPUs: {res.message}")


@node.command("publish")
def node_publish():
    """On the head, once its Ray is up: store its storage record (fresh nonces, input hashes) and its
    versions and toolkit commit in Ray's GCS, where each worker's `make join` compares its own with
    them (the train stage does this itself).

    \b
    Example:
      pyhelpers node publish
    """
    cfg, lay = ctx()
    mine, rec = cluster.publish(cfg, lay)
    echo_err("published: " + ", ".join(f"{k} {mine.get(k)}" for k in cluster.COMPARED)
          + f"; storage nonces under {' and '.join(rec['dirs'])}, {len(rec['hashes'])} input hash(es)")


@node.command("check")
def node_check():
    """On the head: wait up to JOIN_TIMEOUT for the workers, then check shared storage on each, naming
    the first node that does not share it (the train stage does this itself after its Ray starts, and
    removes such a node).

    \b
    Example:
      pyhelpers node check
    """
    cfg, lay = ctx()
    rec = cluster.publish_storage(cfg, lay)
    cluster.wait_for_workers(cfg, lay, echo_err)
    wrong, gone = cluster.check_storage(cfg, lay, echo_err, rec)
    for _, addr, why in gone[:1]:
        raise ToolkitError(f"node {addr} left the cluster while its storage was checked ({why})", addr,
                           "run `pyhelpers node check` again once its agent has started its Ray again")
    for _, _, problem in wrong[:1]:
        raise problem


@node.command("leave")
def node_leave():
    """Stop this worker's Ray node only (the run and the other nodes go on; the head's job may fail and
    resume once a worker joins again).

    \b
    Example:
      pyhelpers node leave
    """
    cfg, lay = ctx()  # (no whole-configuration check: a broken worker must still be able to leave)
    if not cfg.NODE_ADDR:
        raise ToolkitError("this worker's records are runs/<RUN>/nodes/<NODE_ADDR>/, and NODE_ADDR is empty",
                           "NODE_ADDR", "set it to the address this worker joined with: `make status` on the head "
                           "lists the nodes")
    pids, _ = _dirs(cfg, lay)
    for r in groups.stop_all(pids, cfg.STOP_GRACE, names=[SERVICE], missing_ok=True):
        echo_err(r.message)
    for r in family.stop_marked(cluster.worker_temp_dir(cfg), cfg.STOP_GRACE):
        echo_err(r.message)
    echo_err(f"this worker ({cfg.NODE_ADDR}) left the run")


@node.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the nodes as JSON.")
def node_status(as_json):
    """The run's nodes as the shared run dir records them: the head (nodes.json) and each worker's
    heartbeat (nodes/<addr>/node.json).

    \b
    Example:
      pyhelpers node status
    """
    cfg, lay = ctx()
    rows = node_heartbeats.node_rows(cfg, lay, time.time())
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for line in node_heartbeats.node_lines(rows):
        click.echo(line)


@node.command("head-namespace")
def node_head_namespace():
    """Print the head's network namespace of a two-node rehearsal running now (nothing when none is):
    bin/rehearse --env runs `make status REHEARSAL=1` and the like inside it.

    \b
    Example:
      pyhelpers node head-namespace
    """
    cfg, _ = ctx()
    click.echo(twonode.live_head_namespace(cfg.RUNS_DIR) or "")


@node.command("rehearse", context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def node_rehearse(args):
    """The rehearsal on two nodes of this host (make rehearse NNODES=2): two network namespaces joined by a
    veth pair, the head's rehearsal in one and a worker's join in the other. Needs root and iproute2.

    \b
    Example:
      pyhelpers node rehearse
    """
    cfg, _ = ctx()
    sys.exit(twonode.run(cfg.root, cfg.RUNS_DIR, list(args), cfg.STOP_GRACE))


@node.command("rehearsal-stop", context_settings={"ignore_unknown_options": True})
@click.argument("stop", nargs=-1, required=True, type=click.UNPROCESSED)
def node_rehearsal_stop(stop):
    """`make stop REHEARSAL=1` on a two-node rehearsal (bin/rehearse --env runs it): the STOP command inside
    the head's namespace while it is there, then, outside, what the rehearsal's record names is removed:
    the processes still inside both namespaces, the namespaces, their mounts and the veth pair (a killed
    rehearsal cannot remove them itself). Exits with STOP's status.

    \b
    Example:
      pyhelpers node rehearsal-stop -- bin/stop
    """
    cfg, _ = ctx()
    head_ns = twonode.live_head_namespace(cfg.RUNS_DIR)
    rc = subprocess.run(netns.exec_argv(head_ns, list(stop)) if head_ns else list(stop)).returncode
    twonode.reclaim(cfg.RUNS_DIR, cfg.STOP_GRACE, click.echo)
    sys.exit(rc)
