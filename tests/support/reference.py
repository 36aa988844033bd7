"""The uninterrupted reference rehearsal (ROUNDS=2, fake keys in .env) that many tests read.

Built once per `make test` by whichever worker asks first (support/shared.py `once`), while a
watch reads every process's command line for the keys and the run's Ray token; every worker then
gets the same `view()`: env, run (support/rehearsal.Run), result (returncode, stdout), tmp, and
what the watch saw.
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

from support.rehearsal import KEYS, Run, rehearse, rehearse_env, stop_leftovers


class CmdlineWatch:
    """Reads every process's /proc/<pid>/cmdline every 0.1 s while a rehearsal runs and keeps
    what contains one of `needles` (a secret must never be on a command line)."""

    def __init__(self, needles, more=lambda: []):
        self.needles = [n.encode() for n in needles]
        self.more = more  # needles known only once the run makes them (its Ray token)
        self.hits: list[str] = []
        self.scans = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        from pyhelpers.procs import procfs

        while not self._stop.wait(0.1):
            needles = self.needles + [n.encode() for n in self.more()]
            for pid in procfs.all_pids():
                try:  # whole, not procfs.cmdline's 200 characters: a key may sit further on
                    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if any(n in raw for n in needles):
                    shown = raw.replace(b"\x00", b" ")[:300]
                    self.hits.append(f"{pid}: {shown!r}")
            self.scans += 1

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def build(tmp: Path, world: Path) -> dict:
    """Run the reference rehearsal in `tmp`; what every worker's view is made of (JSON)."""
    env = rehearse_env(tmp, world, tracked=False)
    token = Run(tmp / "runs").run_dir / "ray" / "auth-token"
    with CmdlineWatch(KEYS, lambda: [t for t in [token.read_text().strip()] if t] if token.exists() else []) as watch:
        res = rehearse(env)
    if res.returncode != 0:
        stop_leftovers(env)
    return {"env": env, "tmp": str(tmp), "returncode": res.returncode, "stdout": res.stdout,
            "cmdline_hits": watch.hits, "cmdline_scans": watch.scans}


def view(info: dict) -> SimpleNamespace:
    tmp = Path(info["tmp"])
    return SimpleNamespace(env=info["env"], run=Run(tmp / "runs"), tmp=tmp,
                           result=SimpleNamespace(returncode=info["returncode"], stdout=info["stdout"]),
                           cmdline_hits=info["cmdline_hits"], cmdline_scans=info["cmdline_scans"])
