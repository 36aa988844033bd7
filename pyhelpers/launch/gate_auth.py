"""The run's token for ShopSimulator's gate (pyhelpers/shopsim/gate.py, a multi-node run only).

One token per run, made before the gate's first start and kept for the run's life (a plugin of a
running job holds it), in runs/<RUN>/shopsim-gate/token: directory 0700, file 0600, written whole
before it is visible -- the run directory is shared by every node (docs/multinode.md), which is how
the plugin on a worker reads it. Handled like Ray's token (ray_auth.py): never on a command line,
in a log, in run.json or in the plugin's YAML (which holds its path). A separate secret from Ray's:
the gate's token opens ShopSimulator only.
"""

from __future__ import annotations

from pathlib import Path

from pyhelpers.launch import ray_auth
from pyhelpers.run import layout


def token_file(run_dir: Path) -> Path:
    return layout.shopsim_gate_token(run_dir)


def ensure_token(run_dir: Path) -> Path:
    return ray_auth.ensure_token_file(token_file(run_dir))
