"""The ledger of ShopSimulator slots an evaluation holds: `<dir>/slots.jsonl`.

pack_api has no "which slots are taken" request, and a killed client leaks every slot it held
(nothing releases them until `over`). So each attempt writes, before and after it holds a slot:

  {"op": "reset", "key": K}                      a reset is on its way (it pops a slot server-side)
  {"op": "held", "key": K, "env": E}             the reset answered: slot E is ours
  {"op": "done", "key": K, "env": E|null, "freed": true|false}
                                                 the attempt is over; freed=false when the release
                                                 failed, or the reset failed in any way but "no
                                                 free slot" (pack_api pops before it can fail)

Lines are appended and flushed (one write each: a SIGKILL cannot lose a flushed line; no fsync, as
an OS crash takes the simulator's pool with it). `outstanding()` replays the ledger: known slots
(E) still held and resets whose slot number never arrived. `clean_up()` releases the known ones
with release_one each (those beyond the pool count as unknown: pack_api would add them to its
free set) and, when some are unknown, frees them with release_all, which is safe
because an evaluation is the simulator's only client (training has stopped; the evaluate stage
also releases all before it starts). It then empties the ledger. The runner calls it on
`--resume` (before playing) and at the end of every run (slots whose release failed while the
simulator was down).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from pyhelpers.errors import ToolkitError
from pyhelpers.jsonfiles import write_bytes_atomic
from pyhelpers.shopsim.client import ShopSimClient
from pyhelpers.shopsim.protocol import ShopSimError

log = logging.getLogger(__name__)


class SlotLedger:
    """Implements episode.Hooks: one line per slot event."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a", encoding="utf-8")

    def _write(self, rec: dict) -> None:
        self._fh.write(json.dumps(rec, sort_keys=True) + "\n")
        self._fh.flush()

    def reset_sent(self, key: str) -> None:
        self._write({"op": "reset", "key": key})

    def slot_held(self, key: str, env_idx: int) -> None:
        self._write({"op": "held", "key": key, "env": env_idx})

    def slot_done(self, key: str, env_idx: int | None, freed: bool) -> None:
        self._write({"op": "done", "key": key, "env": env_idx, "freed": bool(freed)})

    def close(self) -> None:
        self._fh.close()


def outstanding(path: Path) -> tuple[list[int], int]:
    """(known slots still held, count of resets whose slot is unknown), from the ledger."""
    path = Path(path)
    if not path.exists():
        return [], 0
    keys: dict[str, int | None] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(raw)
            op, key = rec["op"], rec["key"]
        except (ValueError, KeyError, TypeError):
            continue  # a torn last line: the event it describes is covered by the line before
        if op == "reset":
            keys[key] = None
        elif op == "held":
            keys[key] = rec.get("env")
        elif op == "done" and rec.get("freed"):
            keys.pop(key, None)
        elif op == "done" and rec.get("env") is not None:
            keys[key] = rec["env"]
    known = sorted({v for v in keys.values() if v is not None})
    return known, sum(1 for v in keys.values() if v is None)


async def clean_up(path: Path, client: ShopSimClient) -> dict:
    """Free what the ledger says may still be taken; empty the ledger. Returns what was done."""
    known, unknown = outstanding(path)
    beyond = [env for env in known if client.pool_size is not None and env >= client.pool_size]
    if beyond:  # a ledger from a bigger pool: release_one would poison the server's free set
        known = [env for env in known if env not in beyond]
        unknown += len(beyond)
    done = {"released": [], "release_all": False}
    try:
        for env in known:
            await client.release_one(env)
            done["released"].append(env)
        if unknown:
            await client.release_all()
            done["release_all"] = True
    except ShopSimError as exc:
        raise ToolkitError(f"cannot release the slots a previous run left taken: {exc}", str(path),
                           "start ShopSimulator again, then rerun with --resume") from None
    if known or unknown:
        log.info("slot ledger %s: released %s%s", path, known,
                 f" and {unknown} unknown (release_all)" if unknown else "")
    write_bytes_atomic(Path(path), b"")
    return done
