"""The toolkit's own W&B runs (val, gate, analyst): one run per figure owner, logged once.

`log_once` opens a run with group=, job_type=, a deterministic id= and dir=, lets the caller log
into it, finishes it, and then writes a marker `<run_dir>/wandb/logged/<id>.json`. A second call
for the same id (a resumed stage) finds the marker and logs nothing: in offline mode W&B ignores
resume= and would write a second copy of the run (a new offline-run-<ts>-<id> dir per start,
seen with wandb 0.31.0), so the marker, not W&B,
is what makes "logged once" true. A crash before the marker means the figures are logged again
by the resumed stage under the same id (never lost; `wandb sync` merges same-id runs).

W&B files go to `<run_dir>/wandb` (docs/architecture.md: WANDB_DIR of every process of the run). wandb is
imported inside the function, so commands that do not log start fast. Secrets: config keys that
config.is_secret() names are dropped; nothing of ours is put on argv (W&B records argv).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from pyhelpers.config.declarations import is_secret
from pyhelpers.jsonfiles import load_json, write_json_exclusive
from pyhelpers.run.layout import wandb_dir, wandb_marker

_ID_BAD = re.compile(r"[^A-Za-z0-9_.-]+")


def run_id(*parts: object) -> str:
    """A W&B run id from parts: safe characters only, at most 64 (long ids end in a hash)."""
    raw = "-".join(str(p) for p in parts if str(p))
    rid = _ID_BAD.sub("_", raw).strip("_-.") or "run"
    if len(rid) > 64:
        rid = rid[:47] + "-" + hashlib.sha256(raw.encode("utf-8")).hexdigest()[:16]
    return rid


def marker_path(run_dir: Path, rid: str) -> Path:
    return wandb_marker(run_dir, rid)


def logged(run_dir: Path, rid: str) -> dict | None:
    """The marker of a run already logged (None when it was not)."""
    path = marker_path(run_dir, rid)
    return load_json(path) if path.exists() else None


def public_config(config: Mapping) -> dict:
    """config without secret-named keys (…_KEY, …_TOKEN, …)."""
    return {k: v for k, v in config.items() if not is_secret(str(k).upper())}


def log_once(*, project: str, group: str, job_type: str, run_dir: Path, rid: str, name: str,
             config: Mapping, log: Callable[[object], None], mode: str | None = None) -> bool:
    """Open run `rid`, call log(run), finish, mark. False when already marked or mode is disabled."""
    if mode == "disabled" or logged(run_dir, rid) is not None:
        return False
    import wandb  # heavy: wandb (~1 s), only when a run is logged

    out_dir = wandb_dir(run_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    run = wandb.init(project=project, group=group or None, job_type=job_type, id=rid, name=name,
                     dir=str(out_dir), config=public_config(config), resume="allow", mode=mode,
                     reinit="create_new", settings=wandb.Settings(console="off", quiet=True))
    try:
        log(run)
    except BaseException:
        run.finish(exit_code=1)
        raise
    run.finish()
    write_json_exclusive(marker_path(run_dir, rid), {"id": rid, "project": project, "group": group,
                                                     "job_type": job_type, "name": name})
    return True
