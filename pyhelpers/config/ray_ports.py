"""Every port the run's Ray head opens, from the configuration (docs/architecture.md §5).

Ray picks most of its ports itself unless told: the client server 10001, the dashboard agent
52365, two Prometheus servers 44217/44227, random ones for the rest. Two runs on one machine then
collide, and the second dies with "No available agent" and the cause only in a Ray log. So every
port is set here: RAY_DASHBOARD_PORT for the dashboard + job API (the one a user tunnels to), and
RAY_PORT for the GCS and, at fixed offsets above it, everything else:

| port          | what                      | how Ray 2.60 is told                   |
|---------------|---------------------------|----------------------------------------|
| RAY_PORT      | GCS                       | `ray start --port`                     |
| RAY_PORT + 1  | Ray client server         | `--ray-client-server-port`             |
| RAY_PORT + 2  | raylet (node manager)     | `--node-manager-port`                  |
| RAY_PORT + 3  | object manager            | `--object-manager-port`                |
| RAY_PORT + 4  | dashboard agent HTTP      | `--dashboard-agent-listen-port`        |
| RAY_PORT + 5  | dashboard agent gRPC      | `--dashboard-agent-grpc-port`          |
| RAY_PORT + 6  | runtime-env agent         | `--runtime-env-agent-port`             |
| RAY_PORT + 7  | metrics export            | `--metrics-export-port`                |
| RAY_PORT + 8  | autoscaler metrics        | env AUTOSCALER_METRIC_PORT (no flag)   |
| RAY_PORT + 9  | dashboard metrics         | env DASHBOARD_METRIC_PORT (no flag)    |

Workers (one port per worker process, the job's drivers and actors included) get a port the
kernel picks (`--min-worker-port 0 --max-worker-port 0`): a fixed range would have to be as wide
as the number of workers and could only be checked port by port, while a kernel-chosen port is
free by construction. Sources: ray 2.60.0 scripts/scripts.py:500-693 (flags),
autoscaler/_private/constants.py:106 and dashboard/consts.py:67 (the two env-only ports),
_private/parameter.py:300-304 (port 0 = kernel-chosen).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# (what, the flag or environment variable that sets it, offset from RAY_PORT)
BASED: tuple[tuple[str, str, int], ...] = (
    ("GCS", "--port", 0),
    ("client server", "--ray-client-server-port", 1),
    ("raylet", "--node-manager-port", 2),
    ("object manager", "--object-manager-port", 3),
    ("dashboard agent HTTP", "--dashboard-agent-listen-port", 4),
    ("dashboard agent gRPC", "--dashboard-agent-grpc-port", 5),
    ("runtime-env agent", "--runtime-env-agent-port", 6),
    ("metrics export", "--metrics-export-port", 7),
    ("autoscaler metrics", "AUTOSCALER_METRIC_PORT", 8),
    ("dashboard metrics", "DASHBOARD_METRIC_PORT", 9),
)
SPAN = len(BASED)  # RAY_PORT .. RAY_PORT + SPAN - 1 are the run's


@dataclass(frozen=True)
class RayPort:
    what: str
    setting: str  # the `ray start` flag or the environment variable
    knob: str  # the knob it comes from, with its offset: RAY_PORT+3
    port: int


def ports(cfg) -> list[RayPort]:
    """Every fixed port of the head, the dashboard first."""
    base = cfg.int("RAY_PORT")
    out = [RayPort("dashboard + job API", "--dashboard-port", knob="RAY_DASHBOARD_PORT", port=cfg.int("RAY_DASHBOARD_PORT"))]
    out += [RayPort(what, setting, knob="RAY_PORT" + (f"+{off}" if off else ""), port=base + off)
            for what, setting, off in BASED]
    return out


def port_of(cfg, what: str) -> int:
    return next(p.port for p in ports(cfg) if p.what == what)


def flags(cfg) -> list[str]:
    """The `ray start` flags that set them (workers: kernel-chosen ports)."""
    argv = []
    for p in ports(cfg):
        if p.setting.startswith("--"):
            argv += [p.setting, str(p.port)]
    return argv + ["--min-worker-port", "0", "--max-worker-port", "0"]


def env(cfg) -> dict[str, str]:
    """The head's environment for its addresses: the ports Ray reads from its environment only,
    and loopback for everything. `ray start --node-ip-address 127.0.0.1` alone is not enough: on
    Linux Ray replaces a loopback node address with the machine's routable one
    (scripts/scripts.py:855 -> _private/services.py:786-821) and then binds the client server and
    advertises on it, and its C++ servers listen on all interfaces. With
    RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (ray_constants.py:657) the node address stays 127.0.0.1 and
    every listener binds it; what it also turns off, joining other nodes to the cluster
    (scripts.py:1169), a one-machine run never does."""
    out = {p.setting: str(p.port) for p in ports(cfg) if not p.setting.startswith("--")}
    if cfg.multinode:
        return {**out, **multinode_env()}
    return {**out, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


SHIM_DIR = Path(__file__).resolve().parents[1] / "launch" / "ray_shim"  # a path, not an import: Ray loads it
# The worker-side ports: the head's block less the GCS and the client server (head only).
WORKER_BASED = tuple(b for b in BASED if b[2] >= 2 and b[1].startswith("--"))


def multinode_env(pythonpath: str | None = None) -> dict[str, str]:
    """A Ray node of a run with NNODES > 1 (head or worker), docs/multinode.md §4: its node address is
    NODE_ADDR (`--node-ip-address`), so Ray's Python listeners bind NODE_ADDR and loopback, and its C++
    gRPC servers every address (the token guards them); ray_shim/ moves the three unauthenticated
    Prometheus servers, which would bind every address too, to loopback. pythonpath: the inherited
    PYTHONPATH (default: this process's), kept after the shim."""
    inherited = os.environ.get("PYTHONPATH", "") if pythonpath is None else pythonpath
    return {"SHOPSIMRL_METRICS_HOST": "127.0.0.1",
            "PYTHONPATH": str(SHIM_DIR) + (os.pathsep + inherited if inherited else "")}


def worker_flags(cfg) -> list[str]:
    """`ray start` flags of a worker node: the run's block above the GCS and client server (which only
    the head has), workers on kernel-chosen ports."""
    base = cfg.int("RAY_PORT")
    argv = []
    for _, setting, off in WORKER_BASED:
        argv += [setting, str(base + off)]
    return argv + ["--min-worker-port", "0", "--max-worker-port", "0"]
