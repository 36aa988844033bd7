"""One rehearsal for a bench: `bin/rehearse` with the caller's knobs, its own free ports (two
benches, or a bench beside `make test`, never share one), its output kept out of the figures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]

from support.rehearsal import own_ports  # noqa: E402


def rehearse(label: str, tmp: Path, **knobs: str) -> Path:
    """Run a rehearsal in `tmp` (RUNS_DIR, .env there) with `knobs`; its run directory. Exits
    with the rehearsal's last lines when it fails: a bench has no figure without it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB_", "FAKE_"))}
    env.update(RUNS_DIR=str(tmp / "runs"), SHOPSIMRL_ENV_FILE=str(tmp / ".env"), STOP_GRACE="2", **own_ports(),
               **knobs)
    print(f"  {label}: rehearsal in {tmp} ...", flush=True)
    done = subprocess.run([str(ROOT / "bin" / "rehearse")], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"the rehearsal '{label}' failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return tmp / "runs" / "rehearsal"
