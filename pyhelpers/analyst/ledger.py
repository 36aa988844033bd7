"""The analyst's state in a round dir: which spool records are done, pending or quarantined,
how pending ones are grouped into batches, and the lock that keeps one analyst per round.

Truth is in the candidate files: a record is processed exactly when its id is in the
``record_ids`` of a file ``candidates/<batch_id>.json``. The ledger (``analyst/ledger.jsonl``,
append-only, one fsynced JSON line per event) adds what the files cannot say: batches that were
planned but not yet written (so a batch re-sent after a crash has the same records and rewrites
the same file name), and quarantined spool files with the reason. On start, `recover()` rebuilds
the processed set from the candidate files, appends a ``recovered`` line for any file the ledger
missed (a crash between the rename of the candidate file and the ledger append), and deletes
stale temp files (``.*.tmp``) that a SIGKILL left in candidates/.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import logging
import os
import re
from pathlib import Path

from pyhelpers.analyst.budget import Clock
from pyhelpers.errors import ToolkitError
from pyhelpers.jsonfiles import validation_errors
from pyhelpers.run.layout import RoundFiles

log = logging.getLogger("pyhelpers.analyst")

ID_RE = re.compile(r"^r([0-9]+)-s([0-9]+)-g([0-9]+)-i([0-9]+)$")


def natural_key(record_id: str) -> tuple[int, ...]:
    """(round, rollout, group, index): the order records are grouped in (s2 before s10)."""
    return tuple(int(x) for x in ID_RE.match(record_id).groups())


def batch_id(record_ids: list[str]) -> str:
    """First 16 hex of sha256 over the (string-)sorted record ids joined by newlines."""
    return hashlib.sha256("\n".join(sorted(record_ids)).encode("utf-8")).hexdigest()[:16]


def round_of_dir(round_dir: Path) -> int | None:
    return RoundFiles(Path(round_dir)).number


class RoundLock:
    """An exclusive flock on analyst/lock: one analyst per round dir. The kernel drops it when
    the holder dies (SIGKILL included), so a stale lock cannot outlive its process."""

    def __init__(self, path: Path):
        self.path, self._fd = Path(path), None

    def acquire(self, clock: Clock, wait: bool) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                self._fd = fd
                return True
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise
            if not wait or not clock.wait(0.2):
                os.close(fd)
                return False

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class Ledger:
    def __init__(self, round_dir: Path, round_no: int, readonly: bool = False):
        self.round_dir, self.round, self.readonly = Path(round_dir), round_no, readonly
        files = RoundFiles(self.round_dir)
        self.spool, self.candidates = files.spool, files.candidates
        self.path = files.analyst_dir / "ledger.jsonl"
        self.processed: dict[str, str] = {}  # record id -> batch id of its candidate file
        self.files: dict[str, dict] = {}  # batch id -> {"status", "n_proposals", "n_records"}
        self.quarantined: dict[str, tuple[str, str]] = {}  # spool file name -> (sha256, reason)
        self.planned: dict[str, list[str]] = {}  # batch id -> record ids, planned and not written
        self._valid: dict[str, dict] = {}  # pending, validated records by id (cache)

    # -- the ledger file ---------------------------------------------------------------------
    def _events(self) -> list[dict]:
        if not self.path.exists():
            return []
        out = []
        for n, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                log.warning("ignoring unreadable ledger line %d of %s (cut by a crash?)", n, self.path)
        return out

    def append(self, event: dict) -> None:
        if self.readonly:  # `analyst status`: look, change nothing
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(event, sort_keys=True, separators=(",", ":")) + "\n"
        with open(self.path, "ab+") as fh:
            if fh.tell() > 0:
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":  # a line cut by a crash: start a fresh one
                    line = "\n" + line
            fh.write(line.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())

    # -- start-up ----------------------------------------------------------------------------
    def recover(self) -> None:
        """Rebuild state from candidates/ (the truth) and the ledger; see the module doc."""
        if not self.readonly:
            self.candidates.mkdir(parents=True, exist_ok=True)
        for stale in [] if self.readonly else self.candidates.glob(".*.tmp"):
            log.info("removing a temp file left by a crash: %s", stale.name)
            stale.unlink(missing_ok=True)
        self.processed, self.files = {}, {}
        for f in sorted(self.candidates.glob("*.json")):
            try:
                doc = json.loads(f.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                log.warning("unreadable candidate file %s: %s", f, exc)
                continue
            errs = validation_errors(doc, "candidates")
            if errs:
                log.warning("candidate file %s violates candidates.schema.json at %s", f, errs[0])
                continue
            self._note_file(doc)
        events = self._events()
        written = {e["batch_id"] for e in events if e.get("event") in ("written", "recovered")}
        for bid in sorted(set(self.files) - written):
            ids = sorted(r for r, b in self.processed.items() if b == bid)
            self.append({"event": "recovered", "batch_id": bid, "record_ids": ids})
        self.planned, self.quarantined = {}, {}
        for e in events:
            if e.get("event") == "planned" and e.get("batch_id") not in self.files:
                self.planned[e["batch_id"]] = list(e["record_ids"])
            elif e.get("event") == "quarantined":
                self.quarantined[e["file"]] = (e["sha256"], e["reason"])
            elif e.get("event") == "released":
                self.quarantined.pop(e["file"], None)

    def _note_file(self, doc: dict) -> None:
        bid = doc["batch_id"]
        for rid in doc["record_ids"]:
            other = self.processed.get(rid)
            if other and other != bid:
                log.warning("record %s is in two candidate files (%s, %s)", rid, other, bid)
            self.processed[rid] = bid
            self._valid.pop(rid, None)
        self.files[bid] = {"status": doc["status"], "n_proposals": len(doc["proposals"]),
                           "n_records": len(doc["record_ids"])}
        self.planned.pop(bid, None)

    # -- spool -------------------------------------------------------------------------------
    def _check(self, name: str, data: bytes) -> tuple[dict | None, str]:
        try:
            rec = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            return None, f"not valid JSON ({exc})"[:300]
        errs = validation_errors(rec, "spool")
        if errs:
            more = f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
            return None, f"violates spool.schema.json at {errs[0]}{more}"[:300]
        if name != f"{rec['id']}.json":
            return None, f"file name does not match its id {rec['id']!r}"
        parts = natural_key(rec["id"])
        if parts != (rec["round"], rec["rollout_id"], rec["group"], rec["index"]):
            return None, "id does not match its round/rollout_id/group/index fields"
        if rec["round"] != self.round:
            return None, f"record of round {rec['round']} in the dir of round {self.round}"
        return rec, ""

    def scan(self) -> list[dict]:
        """Pending valid records in grouping order. New bad files are quarantined (ledger line
        with the reason); a quarantined file whose bytes changed is checked again."""
        if not self.spool.is_dir():
            return []
        for f in sorted(self.spool.iterdir()):
            name = f.name
            if name.startswith(".") or not name.endswith(".json") or not f.is_file():
                continue  # writers' temp files (.<name>.*.tmp) and foreign files
            stem = name[:-5]
            if stem in self.processed or (stem in self._valid and name not in self.quarantined):
                continue
            try:
                data = f.read_bytes()
            except OSError as exc:
                log.warning("cannot read spool file %s: %s", f, exc)
                continue
            digest = hashlib.sha256(data).hexdigest()
            if name in self.quarantined and self.quarantined[name][0] == digest:
                continue
            rec, reason = self._check(name, data)
            if rec is None:
                self.quarantined[name] = (digest, reason)
                self.append({"event": "quarantined", "file": name, "sha256": digest, "reason": reason})
                if not self.readonly:
                    log.warning("quarantined spool file %s: %s", name, reason)
                continue
            if name in self.quarantined:
                del self.quarantined[name]
                self.append({"event": "released", "file": name, "sha256": digest})
            if rec["id"] not in self.processed:
                self._valid[rec["id"]] = rec
        return [self._valid[k] for k in sorted(self._valid, key=natural_key)]

    # -- batching ----------------------------------------------------------------------------
    def plan(self, pending: list[dict], size: int, partial: bool) -> list[list[dict]]:
        """Batches to send now: batches planned before a crash first (same records, so the same
        batch id and file name), then consecutive groups of `size` in grouping order; the last,
        smaller group only when `partial` (drain)."""
        by_id = {r["id"]: r for r in pending}
        batches, used = [], set()
        for bid, ids in list(self.planned.items()):
            if all(i in by_id for i in ids) and not used & set(ids):
                batches.append([by_id[i] for i in sorted(ids, key=natural_key)])
                used |= set(ids)
            else:
                del self.planned[bid]  # its records changed hands; nothing was written for it
        rest = [r for r in pending if r["id"] not in used]
        for start in range(0, len(rest), size):
            group = rest[start:start + size]
            if len(group) == size or partial:
                batches.append(group)
        return batches

    def mark_planned(self, bid: str, ids: list[str]) -> None:
        if self.planned.get(bid) != sorted(ids):
            self.planned[bid] = sorted(ids)
            self.append({"event": "planned", "batch_id": bid, "record_ids": sorted(ids)})

    def mark_written(self, doc: dict) -> None:
        """Call after candidates/<batch_id>.json is in place."""
        self._note_file(doc)
        self.append({"event": "written", "batch_id": doc["batch_id"], "record_ids": doc["record_ids"],
                     "status": doc["status"], "reason": doc["reason"]})

    def pending_count(self) -> int:
        return len(self._valid)

    def totals(self) -> dict[str, int]:
        """Counters derived from the candidate files (exact across crashes)."""
        files = self.files.values()
        return {"records_processed": len(self.processed),
                "records_quarantined": len(self.quarantined),
                "batches_ok": sum(1 for f in files if f["status"] == "ok"),
                "batches_rejected": sum(1 for f in files if f["status"] == "rejected"),
                "proposals": sum(f["n_proposals"] for f in files)}


def require_round(round_dir: Path, round_no: int | None) -> int:
    """The round number: --round, else from the dir name round-NNN."""
    found = round_of_dir(round_dir) if round_no is None else round_no
    if found is None:
        raise ToolkitError("cannot tell which round this is", str(round_dir),
                           "name the dir round-NNN (as the driver does) or pass --round N")
    if not Path(round_dir).is_dir():
        raise ToolkitError("round dir not found", str(round_dir), "pass an existing runs/<run>/rounds/round-NNN")
    return found

