"""Whether the nodes of a multi-node run agree on the time (docs/multinode.md §5).

Two machines' wall clocks drift apart by seconds to minutes without NTP. The toolkit's own decisions
do not depend on it (a worker's liveness is judged on one machine's clock: launch/cluster.py
heartbeat_age), but the nodes' logs, events and W&B records then disagree on when things happened.
On the head, while the run's Ray is up, a task pinned to each worker reads that worker's clock
between two readings of the head's own (launch/node_probe.py clocks): the worker's offset is its
reading against the midpoint, known to within half the interval.
"""

from __future__ import annotations

from pyhelpers.doctor.base import PASS, SKIP, WARN, Context, Result, result
from pyhelpers.launch import cluster, services
from pyhelpers.run.layout import from_config

SKEW_S = 2.0  # beyond the measuring interval: "a few seconds" is already more than NTP leaves


def offsets(clocks: dict) -> dict[str, tuple[float, float]]:
    """node -> (its clock minus the head's, the uncertainty of that: half the interval it was read in)."""
    return {node: (c["theirs"] - (c["before"] + c["after"]) / 2, (c["after"] - c["before"]) / 2)
            for node, c in clocks.items()}


def check_node_clocks(ctx: Context) -> list[Result]:
    cfg = ctx.cfg
    if not cfg.multinode:
        return [result("node-clocks", PASS, "one node (NNODES=1): no other clock to compare")]
    if cfg.HEAD_ADDR and cfg.HEAD_ADDR != cfg.NODE_ADDR:
        return [result("node-clocks", SKIP, "on a worker: the head compares every node's clock with its own",
                       fix=f"`make doctor` on the head ({cfg.HEAD_ADDR}) while the run is up")]
    lay = from_config(cfg)
    if not services.alive(lay, "ray-head"):
        return [result("node-clocks", SKIP, "the run's Ray head is not running here: the nodes' clocks are read "
                                            "through it", fix="`make doctor` again while the run is up (make train)")]
    measured = offsets(cluster.probe(cfg, lay, "clocks", cluster.gcs_address(cfg))["clocks"])
    if not measured:
        return [result("node-clocks", SKIP, "no worker has joined the run's Ray yet",
                       fix="`make doctor` again once the workers joined")]
    off = {node: (d, e) for node, (d, e) in measured.items() if abs(d) - e > SKEW_S}
    if off:
        words = "; ".join(f"{node}'s clock is {abs(d):.1f} s {'ahead of' if d > 0 else 'behind'} the head's (±{e:.1f} s)"
                          for node, (d, e) in sorted(off.items()))
        return [result("node-clocks", WARN, words,
                       fix="run NTP on every node (chrony, or `timedatectl set-ntp true`): the nodes' logs and "
                           "records disagree on when things happened by that much")]
    worst = max(abs(d) + e for d, e in measured.values())
    return [result("node-clocks", PASS, f"the clocks of {', '.join(sorted(measured))} agree with the head's "
                                        f"within {worst:.1f} s")]
