"""The data source's position after every step, so a job killed between slime's tracker and its
data-state file resumes at the right task instead of the first.

slime 624b824 saves a round's checkpoint in this order (train.py:71-80): the Megatron save, whose
tracker latest_checkpointed_iteration.txt is written last (Megatron checkpointing.py:703-767),
then --save-hf, then RolloutManager.save -> rollout/global_dataset_state_dict_<N>.pt
(rollout/data_source.py:123-136). A kill after the tracker leaves a save that Megatron resumes
from while the data source, finding no file, silently starts again at offset 0 (:138-148).

After each step the plugin writes the same counters (record) to
<--save>/rollout/shopsimrl_data_state_<N>.json; at the first step of a job, when slime's file for
the step before is missing, it puts the recorded position back into the data source and writes
slime's own file through the data source's save/load (restore). Rotation keeps and cleans these
records beside slime's (pyhelpers/run/checkpoints.py).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from pyhelpers.jsonfiles import load_json_or_none, write_json_atomic
from pyhelpers.run import checkpoints

log = logging.getLogger(__name__)

FIELDS = ("sample_offset", "epoch_id", "sample_group_index", "sample_index")  # data_source.py:127-133
_checked: set[int] = set()  # data sources whose resume was checked (one per slime job)


def record_path(root: str | Path, rollout_id: int) -> Path:
    return checkpoints.plugin_record_path(Path(root), rollout_id)


def slime_path(root: str | Path, rollout_id: int) -> Path:
    return checkpoints.rollout_state_path(Path(root), rollout_id)


def _enabled(args: Any) -> bool:
    return bool(getattr(args, "rollout_global_dataset", True))


def record(args: Any, rollout_id: int, data_source: Any) -> None:
    """The data source's counters after step `rollout_id` (what slime's save would write now)."""
    if not (_enabled(args) and getattr(args, "save", None)):
        return
    _checked.add(id(data_source))
    state = {k: int(getattr(data_source, k)) for k in FIELDS if hasattr(data_source, k)}
    meta = getattr(data_source, "metadata", None)
    try:
        json.dumps(meta)
        state["metadata"] = meta if meta is not None else {}
    except (TypeError, ValueError):
        pass  # slime's own metadata is {} ("TODO remove"); anything else is not ours to keep
    write_json_atomic(record_path(args.save, rollout_id), state)


def restore(args: Any, rollout_id: int, data_source: Any) -> str | None:
    """At a job's first step: if slime found no state file for the step before, set the recorded
    position and write slime's file. Returns what was done (None: nothing needed)."""
    if id(data_source) in _checked:
        return None
    _checked.add(id(data_source))
    load = getattr(args, "load", None)
    if not (_enabled(args) and load) or rollout_id <= 0:
        return None
    prev = rollout_id - 1
    if slime_path(load, prev).exists():
        return None
    rec = load_json_or_none(record_path(load, prev))
    if not isinstance(rec, dict) or not all(isinstance(rec.get(k), int) for k in FIELDS):
        msg = (f"{slime_path(load, prev)} is missing and the plugin has no record of that position either: "
               "slime starts the task order again at the first task")
        log.error(msg)
        return msg
    for k in FIELDS:
        setattr(data_source, k, rec[k])
    if isinstance(rec.get("metadata"), dict) and hasattr(data_source, "metadata"):
        data_source.metadata = rec["metadata"]
    if Path(getattr(args, "save", "") or "") == Path(load):
        data_source.save(prev)  # slime's own format (torch.save), then slime's own load (reshuffles)
        data_source.load(prev)
    msg = f"{slime_path(load, prev).name} was missing: data position restored from {record_path(load, prev).name}"
    log.warning(msg)
    return msg
