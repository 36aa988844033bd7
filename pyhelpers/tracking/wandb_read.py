"""Reading an offline W&B run back: the records of its .wandb transaction log, printed by W&B's own
reader exactly as `wandb leet inspect --json RUN_DIR` prints them.

`wandb leet inspect` is a click command that imports wandb (0.6-0.9 CPU-s) only to find the run's
file, then runs the wandb-core binary shipped in the wheel and exits with its code (wandb 0.31.0,
wandb/cli/leet.py: launch_inspect, _resolve_path, _find_wandb_file_in_dir, _base_args; the binary
is wandb/bin/wandb-core, util.get_core_path). This module builds the same command line without
importing wandb: it costs a few hundredths of a CPU-second. The report reads every job's run after
every round, and the tests read dozens. tests/test_gate_wandb.py checks that both print the same
records, so a wandb upgrade that changes the binary's flags fails there first.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path


def core_binary() -> Path | None:
    """wandb-core in the installed wandb package, found without importing wandb; None without it."""
    spec = find_spec("wandb")
    if spec is None or not spec.submodule_search_locations:
        return None
    binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "wandb-core"
    return binary if binary.is_file() else None


def inspect_argv(run_dir: Path) -> list[str] | None:
    """The command that prints every record of the offline run `run_dir` (offline-run-*) as JSON lines;
    None when it has no single run-*.wandb file (W&B writes one per offline run dir) or wandb-core is
    missing. --no-observability is what `wandb leet` adds for an offline run (_base_args)."""
    run_dir = Path(run_dir).resolve()
    files = sorted(run_dir.glob("run-*.wandb"))
    binary = core_binary()
    if len(files) != 1 or binary is None:
        return None
    return [str(binary), "leet", "inspect", "--no-observability", "--json", "--run-file", str(files[0]),
            str(run_dir.parent)]
