"""`ray start` command lines, head and worker, built from the configuration, and the environment
`ray start` gets beside its ports (the ports themselves: pyhelpers/config/ray_ports.py)."""

from __future__ import annotations

import math

from pyhelpers.config import ray_ports
from pyhelpers.config.load import Config


def head_node_addr(cfg: Config) -> str:
    """The address the head's Ray node binds, its GCS included (docs/multinode.md §4)."""
    return cfg.NODE_ADDR if cfg.multinode else "127.0.0.1"


def ray_head(cfg: Config) -> list[str]:
    """`ray start` for a head in the foreground (--block) on loopback, every port from the
    configuration (pyhelpers/config/ray_ports.py; its environment: services.py)."""
    node = head_node_addr(cfg)
    return ["ray", "start", "--head", "--block", "--node-ip-address", node, "--dashboard-host", "127.0.0.1",
            *ray_ports.flags(cfg), "--num-gpus", str(cfg.NUM_GPUS), "--temp-dir", cfg.ray_temp_dir,
            "--disable-usage-stats"]


def ray_start_env(cfg: Config) -> dict[str, str]:
    """What `ray start` gets in its environment on the head and on each worker beside its ports:
    RAY_START_TIMEOUT for its new raylet to register with the GCS. Ray 2.60.0's own wait is 30 s
    (ray/_private/node.py:424-444 raises when a call to the GCS for the new node ends after it), and
    that call waits RAY_raylet_start_wait_time_s for the node, which Ray's error names as the setting
    to raise ('Try increase the RAY_raylet_start_wait_time_s config'): at load 25 on 2 cores a worker
    missed 30 s three times in a row."""
    return {"RAY_raylet_start_wait_time_s": str(math.ceil(cfg.RAY_START_TIMEOUT))}  # Ray reads a whole number


def ray_worker(cfg: Config) -> list[str]:
    """`ray start` for a worker node in the foreground (make join, docs/multinode.md §5): it joins the
    head at HEAD_ADDR:RAY_PORT, binds NODE_ADDR, takes the run's port block above the head-only ports
    and NUM_GPUS GPUs (its environment: launch/cluster.py)."""
    return ["ray", "start", "--block", "--address", f"{cfg.HEAD_ADDR}:{cfg.RAY_PORT}",
            "--node-ip-address", cfg.NODE_ADDR, *ray_ports.worker_flags(cfg), "--num-gpus", str(cfg.NUM_GPUS),
            "--temp-dir", cfg.ray_temp_dir, "--disable-usage-stats"]
