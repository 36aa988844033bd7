"""Shared fixtures: an isolated configuration per test, and ways to call the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FAKES = ROOT / "tests" / "fakes"


def _knob_names() -> list[str]:
    from pyhelpers.config.load import read_knobs

    return list(read_knobs())


@pytest.fixture
def toolkit_env(tmp_path, monkeypatch) -> dict[str, str]:
    """A process environment whose configuration points only into tmp_path.

    Knobs from the developer's own environment are removed; .env is tmp_path/.env (empty);
    TRAIN_SAVE is under tmp_path and SYSTEM_DISK is /dev/shm, a different device, so the
    M2 disk rule passes. The dict is also applied to os.environ for in-process CLI calls.
    """
    for name in _knob_names():
        monkeypatch.delenv(name, raising=False)
    env_file = tmp_path / ".env"
    env_file.write_text("")
    env_file.chmod(0o600)
    values = {
        "SHOPSIMRL_ENV_FILE": str(env_file),
        "RUNS_DIR": str(tmp_path / "runs"),
        "TRAIN_SAVE": str(tmp_path / "save"),
        "DATA_DISK": str(tmp_path),
        "SYSTEM_DISK": "/dev/shm",
        "WANDB_MODE": "offline",
    }
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    return {**os.environ}


def run_pyhelpers(args: list[str], env: dict[str, str], **kw) -> subprocess.CompletedProcess:
    """Run the real `python -m pyhelpers ...` in a subprocess, capturing text output."""
    return subprocess.run([sys.executable, "-m", "pyhelpers", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=kw.pop("timeout", 60), **kw)


# --- W&B offline runs, read back with W&B's own reader -------------------------------------

def offline_runs(run_dir: Path, rid: str) -> list[Path]:
    """The offline W&B run dirs of run id `rid` under a run's WANDB_DIR."""
    return sorted((Path(run_dir) / "wandb" / "wandb").glob(f"offline-run-*-{rid}"))


def wandb_records(offline_run: Path) -> list[dict]:
    """Every record of one offline W&B run, as `wandb leet inspect --json` reads them."""
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "wandb"), "leet", "inspect", "--json", str(offline_run)],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


# --- Rehearsals (tests/support/rehearsal.py) ------------------------------------------------

@pytest.fixture(autouse=True)
def _fresh_slime_singletons():
    """Tests of the rollout plugin each get their own slime GenerateState (support/rollout_stack.py)."""
    if "slime.utils.misc" in sys.modules:
        from support.rollout_stack import fresh_slime_singletons

        fresh_slime_singletons()
    yield


@pytest.fixture(autouse=True)
def _stop_leftover_rehearsals():
    """A failed rehearsal test must not leave its services holding the rehearsal's ports."""
    yield
    from support import rehearsal as rehearsal_support

    rehearsal_support.stop_all_created()


@pytest.fixture(scope="session")
def rehearsal_world(tmp_path_factory) -> Path:
    """Where the rehearsals of this session share their stand-in world (built by the first)."""
    return tmp_path_factory.mktemp("rehearsal-world") / "world"


class _CmdlineWatch:
    """Reads every process's /proc/<pid>/cmdline every 0.1 s while a rehearsal runs and keeps
    what contains one of `needles` (a secret must never be on a command line)."""

    def __init__(self, needles, more=lambda: []):
        import threading

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


class _EnvironWatch:
    """Reads /proc/<pid>/environ of every process of one rehearsal every 0.1 s while it runs and
    keeps, for each secret, who holds it: {name: {pid: [its command, its parent's, …]}}, the
    line up to the rehearsal's first process (a secret reaches only the processes that use it,
    architecture §3). A process is the rehearsal's when its
    environment names the rehearsal's RUNS_DIR, or a process that is the rehearsal's is its
    ancestor: a service started with a trimmed environment is still the driver's child."""

    def __init__(self, marker: str, secrets: dict[str, str], more=lambda: {}):
        import threading

        self.marker = marker.encode()
        self.secrets = secrets
        self.more = more  # secrets known only once the run makes them (its Ray token)
        self.holders: dict[str, dict[int, list[str]]] = {}
        self.members: set[int] = set()  # every process of the rehearsal seen
        self.scans = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        from pyhelpers.procs import procfs

        while not self._stop.wait(0.1):
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
            for pid in ours:
                for name, value in secrets.items():
                    if value in environ[pid] and pid not in self.holders.get(name, {}):
                        line, p = [], pid
                        while p in ours and len(line) < 20:
                            line.append(procfs.cmdline(p, 160))
                            p = parent.get(p, 0)
                        self.holders.setdefault(name, {})[pid] = line
            self.scans += 1

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


@pytest.fixture(scope="session")
def reference(tmp_path_factory, rehearsal_world):
    """One uninterrupted rehearsal (ROUNDS=2, fake keys in .env), shared by every test that reads
    a finished run; the fault and self-healing tests compare their results with it."""
    from types import SimpleNamespace

    from support.rehearsal import DASHSCOPE_KEY, KEYS, WANDB_KEY, Run, rehearse, rehearse_env, track

    tmp = tmp_path_factory.mktemp("reference")
    env = rehearse_env(tmp, rehearsal_world, tracked=False)
    token = Run(tmp / "runs").run_dir / "ray" / "auth-token"

    def ray_token() -> list[str]:
        return [t for t in [token.read_text().strip()] if t] if token.exists() else []

    with (_CmdlineWatch(KEYS, ray_token) as watch,
          _EnvironWatch(f"RUNS_DIR={env['RUNS_DIR']}", {"WANDB_API_KEY": WANDB_KEY, "DASHSCOPE_API_KEY": DASHSCOPE_KEY},
                        lambda: {"the Ray token": t[0]} if (t := ray_token()) else {}) as environ_watch):
        res = rehearse(env)
    if res.returncode != 0:
        track(env)  # the teardown stops what it left running
    assert res.returncode == 0, res.stdout[-6000:]
    return SimpleNamespace(env=env, run=Run(tmp / "runs"), result=res, cmdline_hits=watch.hits,
                           cmdline_scans=watch.scans, environ=environ_watch, tmp=tmp)


@pytest.fixture
def hook():
    """A webhook receiver on loopback (support/rehearsal.py Hook)."""
    from support.rehearsal import Hook

    h = Hook()
    yield h
    h.close()


@pytest.fixture
def hang_hook():
    """A webhook that never answers (until the test ends)."""
    from support.rehearsal import Hook

    h = Hook(hang=True)
    yield h
    h.close()
