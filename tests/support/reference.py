"""The uninterrupted reference rehearsal (ROUNDS=2, fake keys in .env) that many tests read.

Built once per `make test` by whichever worker asks first (support/shared.py `once`), while a
watch reads every process's command line for the keys and the run's Ray token; every worker then
gets the same `view()`: env, run (support/rehearsal.Run), result (returncode, stdout), tmp, and
what the watches saw: secrets on any command line (CmdlineWatch), and who held each secret in
its environment (EnvironWatch; holders' pids are strings once read back from JSON).
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

from support.rehearsal import DASHSCOPE_KEY, KEYS, WANDB_KEY, Run, rehearse, rehearse_env, stop_leftovers


class _Watch:
    """A thread that calls `scan()` every 0.1 s while the `with` block runs (a rehearsal)."""

    def __init__(self):
        self.scans = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(0.1):
            self.scan()
            self.scans += 1

    def scan(self):
        raise NotImplementedError

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


class CmdlineWatch(_Watch):
    """Reads every process's /proc/<pid>/cmdline every 0.1 s while a rehearsal runs and keeps
    what contains one of `needles` (a secret must never be on a command line)."""

    def __init__(self, needles, more=lambda: []):
        self.needles = [n.encode() for n in needles]
        self.more = more  # needles known only once the run makes them (its Ray token)
        self.hits: list[str] = []
        super().__init__()

    def scan(self):
        from pyhelpers.procs import procfs

        needles = self.needles + [n.encode() for n in self.more()]
        for pid in procfs.all_pids():
            try:  # whole, not procfs.cmdline's 200 characters: a key may sit further on
                raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if any(n in raw for n in needles):
                shown = raw.replace(b"\x00", b" ")[:300]
                self.hits.append(f"{pid}: {shown!r}")


class EnvironWatch(_Watch):
    """Reads /proc/<pid>/environ of every process of one rehearsal every 0.1 s while it runs and
    keeps, for each secret, who holds it: {name: {pid: [its command, its parent's, …]}}, the
    line up to the rehearsal's first process (a secret reaches only the processes that use it,
    architecture §3). A process is the rehearsal's when its
    environment names the rehearsal's RUNS_DIR, or a process that is the rehearsal's is its
    ancestor: a service started with a trimmed environment is still the driver's child."""

    def __init__(self, marker: str, secrets: dict[str, str], more=lambda: {}):
        self.marker = marker.encode()
        self.secrets = secrets
        self.more = more  # secrets known only once the run makes them (its Ray token)
        self.holders: dict[str, dict[int, list[str]]] = {}
        self.members: set[int] = set()  # every process of the rehearsal seen
        self.commands: dict[int, str] = {}  # pid -> the last command line a scan could read
        super().__init__()

    def scan(self):
        from pyhelpers.procs import procfs

        secrets = {name: value.encode() for name, value in {**self.secrets, **self.more()}.items()}
        environ, parent = {}, {}
        for pid in procfs.all_pids():
            st = procfs.read_stat(pid)
            try:
                environ[pid] = Path(f"/proc/{pid}/environ").read_bytes()
            except OSError:
                continue
            parent[pid] = st.ppid if st else 0
        ours = {pid for pid, env in environ.items() if self.marker in env}
        for pid in environ:  # and their descendants
            chain, p = [], pid
            while p and p not in ours and p not in chain:
                chain.append(p)
                p = parent.get(p, 0)
            if p in ours:
                ours.update(chain)
        self.members |= ours

        def command(pid: int) -> str:
            # What it runs: its command line, or while it has none to read (procfs.cmdline's "[comm]":
            # exiting, or inside an exec) the last one a scan read, so that a holder caught in its exit
            # is not recorded as its comm ("[python]", the child of whoever started it).
            text = procfs.cmdline(pid, 160)
            if text and not (text.startswith("[") and text.endswith("]")):
                self.commands[pid] = text
            return self.commands.get(pid, text)

        for pid in ours:
            now = command(pid)
            for name, value in secrets.items():
                held = self.holders.get(name, {})
                # Seen again after an exec (a service's start gate is a bash that execs the service
                # itself, environment and pid kept): the pid is recorded as what it runs now.
                if value not in environ[pid]:
                    continue
                if pid not in held or held[pid][0] != now:
                    line, p = [now], parent.get(pid, 0)
                    while p in ours and len(line) < 20:
                        line.append(command(p))
                        p = parent.get(p, 0)
                    self.holders.setdefault(name, {})[pid] = line


def build(tmp: Path, world: Path) -> dict:
    """Run the reference rehearsal in `tmp`; what every worker's view is made of (JSON)."""
    env = rehearse_env(tmp, world, tracked=False, keep_ray_temp=True)  # (tests on any worker read its Ray logs)
    env["SHOPSIMRL_PARSE_LOG"] = str(tmp / "defaults-env-parses.log")  # one line per parse (tests/fakes/README.md)
    resolutions = tmp / "resolutions.log"  # one line per configuration a process resolved or was handed
    env["SHOPSIMRL_RESOLVE_LOG"] = str(resolutions)
    token = Run(tmp / "runs").run_dir / "ray" / "auth-token"

    def ray_token() -> list[str]:
        return [t for t in [token.read_text().strip()] if t] if token.exists() else []

    with (CmdlineWatch(KEYS, ray_token) as watch,
          EnvironWatch(f"RUNS_DIR={env['RUNS_DIR']}", {"WANDB_API_KEY": WANDB_KEY, "DASHSCOPE_API_KEY": DASHSCOPE_KEY},
                       lambda: {"the Ray token": t[0]} if (t := ray_token()) else {}) as environ_watch):
        res = rehearse(env)
    if res.returncode != 0:
        stop_leftovers(env)
    # Read now: later tests run commands in the rehearsal's configuration, which add their own lines.
    resolved = resolutions.read_text().splitlines() if resolutions.exists() else []
    return {"env": env, "tmp": str(tmp), "returncode": res.returncode, "stdout": res.stdout, "resolutions": resolved,
            "cmdline_hits": watch.hits, "cmdline_scans": watch.scans,
            "environ": {"holders": environ_watch.holders, "members": sorted(environ_watch.members),
                        "scans": environ_watch.scans}}


def remove_ray_temp(root: Path) -> list[str]:
    """At the whole session's end (the xdist controller, once every worker is done): the reference's
    Ray temp dir, which it keeps while workers read its Ray logs (keep_ray_temp), once no process
    uses it -- else each `make test` left one /tmp/ray-<hash> behind. Returns what was removed."""
    import json

    from support.rehearsal import ray_temp_dir, remove_unused_ray_temp

    try:
        env = json.loads((Path(root) / "reference" / "result.json").read_text())["env"]
    except (OSError, ValueError, KeyError):
        return []  # (no reference in this session: the fast lane, a subset)
    return remove_unused_ray_temp(ray_temp_dir(env))


def view(info: dict) -> SimpleNamespace:
    tmp = Path(info["tmp"])
    return SimpleNamespace(env=info["env"], run=Run(tmp / "runs"), tmp=tmp,
                           result=SimpleNamespace(returncode=info["returncode"], stdout=info["stdout"]),
                           cmdline_hits=info["cmdline_hits"], cmdline_scans=info["cmdline_scans"],
                           resolutions=info["resolutions"],
                           environ=SimpleNamespace(**info["environ"]))
