"""Stage records: rounds/round-NNN/stages/<stage>.done, one per finished stage of a round.

A record adds detail for humans (inputs, outputs, status; paths relative to the run's roots, no
secrets); the artifacts alone decide where a run stands (each stage's done(), stages/).
"""

from __future__ import annotations

from pathlib import Path

from pyhelpers.jsonfiles import write_json_atomic
from pyhelpers.run.layout import RunLayout


def write_record(lay: RunLayout, r: int, stage: str, *, status: str = "ok", **details) -> Path:
    """Write the record of round r's `stage`; Path values become $RUN_DIR/... or $SAVE_DIR/..."""
    def rel(v):
        if isinstance(v, Path):
            for root, name in ((lay.run_dir, "RUN_DIR"), (lay.save_dir, "SAVE_DIR")):
                try:
                    return f"${name}/{v.resolve().relative_to(root.resolve())}"
                except ValueError:
                    pass
            return v.name
        return v

    path = lay.stage_record(r, stage)
    write_json_atomic(path, {"round": r, "stage": stage, "status": status,
                             **{k: rel(v) for k, v in sorted(details.items())}})
    return path
