"""Running `bin/rehearse` (the real toolkit on the stand-ins) from tests.

    env = rehearse_env(tmp, world)          # isolated RUNS_DIR, shared stand-in world, fake keys in .env
    res = rehearse(env)                      # a whole rehearsal, as `make rehearse` runs it
    p = start(env); wait_for(...); kill_driver(env); rehearse(env, "--resume")

Each rehearsal runs in its own session (so a test can kill the driver alone, as an OOM killer
would), writes its output to <tmp>/rehearse-N.log, and is identified by its RUNS_DIR (which also
gives it its own Ray temp dir). The world of stand-ins (tokenizer, catalog, models, task files,
conda) is built once per session and shared: it is read-only once built.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from conftest import ROOT, _knob_names

from support.http import reply

WANDB_KEY = "wk-rehearsal-SECRET-7f3a9c21e5"
DASHSCOPE_KEY = "sk-rehearsal-SECRET-b81e44d0aa"
KEYS = (WANDB_KEY, DASHSCOPE_KEY)


@dataclass
class Run:
    """Where one rehearsal's files are."""

    runs: Path
    name: str = "rehearsal"

    @property
    def run_dir(self) -> Path:
        return self.runs / self.name

    @property
    def save_dir(self) -> Path:
        return self.runs / ".rehearsal" / "train_save" / self.name

    def round_dir(self, r: int) -> Path:
        return self.run_dir / "rounds" / f"round-{r:03d}"

    def events(self, kind: str | None = None) -> list[dict]:
        from pyhelpers.run import events

        return [e for e in events.read(self.run_dir) if kind is None or e.get("kind") == kind]

    def restarts(self) -> list[dict]:
        """The run's restarts less those for a service that was not ready in its time (`NotReady`: Ray's
        own start on a machine at a load of 18 took over RAY_START_TIMEOUT once, healed by a restart
        like any other hiccup): a test reads the restarts its fault caused, not the ones its machine's
        load adds. A restart its fault caused counts whatever error it was."""
        return [e for e in self.events("run-restart") if e.get("error") != "NotReady"]

    def lock_holder(self) -> dict | None:
        from pyhelpers.run import lock

        return lock.read_holder(self.run_dir / "lock")


# For a rehearsal whose test reads nothing that W&B writes: `**NO_WANDB` in rehearse_env. W&B
# offline (a wandb-core service per logged run, after each evaluation and at the run's end) took a
# fifth of a two-round rehearsal's wall time beside a busy suite (159 s, 128 s without). What W&B
# writes is tested where it is read: the reference rehearsal (test_rehearsal, test_eval), test_watch,
# test_migrate, test_two_nodes, and test_faults' kill matrix (a kill may land while a round's W&B
# logger runs). Not where a test holds `make plan` against what ran: the plan leaves wandb-log out
# under WANDB_MODE=disabled, the run still starts it (to log nothing).
NO_WANDB = {"WANDB_MODE": "disabled"}


_created: list[dict] = []
_ray_temps: set[str] = set()  # the Ray temp dirs of this session's rehearsals (remove_ray_temps)
_ray_envs: list[dict] = []  # their environments: a run they made under another RUN_NAME (make smoke's)


def stop_leftovers(env: dict) -> None:
    """Stop whatever this environment's rehearsals left running, without marking them stopped."""
    holder = Run(Path(env["RUNS_DIR"]), env.get("RUN_NAME", "rehearsal")).lock_holder()
    if holder:  # a driver still running: stop it properly
        in_rehearsal(env, *pyhelpers_cmd("run", "stop"), timeout=180)
    in_rehearsal(env, *pyhelpers_cmd("run", "cleanup"), timeout=180)


def stop_all_created() -> None:
    """Teardown: stop whatever a test's rehearsals left running."""
    while _created:
        stop_leftovers(_created.pop())


def track(env: dict) -> dict:
    """Have the test's teardown stop whatever this environment's rehearsals leave running."""
    _created.append(env)
    return env


def rehearse_env(tmp: Path, world: Path, tracked: bool = True, dotenv: dict | None = None,
                 keep_ray_temp: bool = False, **knobs: object) -> dict[str, str]:
    """A process environment for bin/rehearse: nothing of the developer's configuration, the keys
    in a mode-600 .env (the secret tests look for them everywhere), W&B's own dirs under tmp, ports
    of its own (own_ports: another checkout's tests may rehearse beside it) unless given.
    Whatever its rehearsals leave running is stopped at the test's end (conftest); its Ray temp dir
    is removed at the session's end (remove_ray_temps) unless keep_ray_temp (a rehearsal whose Ray
    logs other xdist workers read, whose sessions may end later than this one's)."""
    tmp = Path(tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    drop = set(_knob_names())
    env = {k: v for k, v in os.environ.items()
           if k not in drop and not k.startswith(("WANDB_", "FAKE_", "SHOPSIMRL_"))}
    env_file = tmp / ".env"
    env_file.write_text(f"WANDB_API_KEY={WANDB_KEY}\nDASHSCOPE_API_KEY={DASHSCOPE_KEY}\n"
                        + "".join(f"{k}={v}\n" for k, v in (dotenv or {}).items()))
    env_file.chmod(0o600)
    for var in ("WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_ARTIFACT_DIR"):
        env[var] = str(tmp / "wandb-home" / var.lower())
    # matplotlib's font cache, built once for the session's rehearsals (the report's first figure in a
    # run with a fresh cache scans the system's fonts: about 2 s of CPU a rehearsal; a user's run pays
    # it once, in its run dir: report/__init__.py)
    env["MPLCONFIGDIR"] = str(Path(world).parent / "mplconfig")
    env.update({"SHOPSIMRL_ENV_FILE": str(env_file), "RUNS_DIR": str(tmp / "runs"),
                "SHOPSIMRL_REHEARSAL_WORLD": str(world), "STOP_GRACE": "2", "HOME": str(tmp / "home")})
    env.update(own_ports())
    env.update({k: str(v) for k, v in knobs.items()})
    if not keep_ray_temp:
        _ray_temps.add(ray_temp_dir(env))
        _ray_envs.append(env)
    return track(env) if tracked else env


def remove_ray_temps() -> list[str]:
    """At the session's end: remove the Ray temp dirs (the head's, and a worker's `-w` one) of this
    session's rehearsals that no process uses any more. Ray leaves its sessions' logs there (a few
    MB a run); a user's run keeps them to read, a suite's 60 rehearsals need not. Only dirs named
    from this session's own RUNS_DIRs: another checkout's suite beside this one keeps its own.
    A run the environment does not name (bin/smoke's RUN_NAME=smoke) is found by its dir in the
    RUNS_DIR. Returns what was removed."""
    temps = set(_ray_temps)
    for env in _ray_envs:
        runs = Path(env["RUNS_DIR"])
        names = [d.name for d in runs.iterdir() if d.is_dir() and not d.name.startswith(".")] if runs.is_dir() else []
        temps.update(ray_temp_dir({**env, "RUN_NAME": name}) for name in names)
    return [path for temp in sorted(temps) for path in remove_unused_ray_temp(temp)]


def remove_unused_ray_temp(temp: str) -> list[str]:
    """A run's Ray temp dir (the head's, and a worker's `-w` one), each removed unless a process still
    uses it. Returns what was removed."""
    from pyhelpers.procs import procfs

    removed = []
    for path in (Path(temp), Path(temp + "-w")):
        if path.is_dir() and not procfs.marker_matches(str(path)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    return removed


_count = iter(range(1, 10**6))


def _log(env: dict) -> Path:
    return Path(env["RUNS_DIR"]).parent / f"rehearse-{next(_count)}.log"


def rehearse(env: dict, *args: str, timeout: float = 900, root: Path = ROOT) -> subprocess.CompletedProcess:
    """Run bin/rehearse (of checkout `root`: this one, or a copy_checkout) to its end; stdout+stderr
    in .stdout (and in a log file beside RUNS_DIR)."""
    log = _log(env)
    with open(log, "w") as fh:
        proc = subprocess.run([str(root / "bin" / "rehearse"), *args], env=env, cwd=root, stdout=fh,
                              stderr=subprocess.STDOUT, start_new_session=True, timeout=timeout)
    proc.stdout = log.read_text(errors="replace")
    return proc


def copy_checkout(dest: Path) -> Path:
    """A copy of this checkout's files (git's tracked and untracked, not its ignored ones) that runs
    on its own: its .venv is this one's, and a rehearsal of it loads its own pyhelpers (give the
    rehearsal's env PYTHONPATH=dest: the .venv's editable install points at this checkout)."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():  # a file git still lists but the work tree deleted is left out
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel, follow_symlinks=False)
    (dest / ".venv").symlink_to(ROOT / ".venv")
    return dest


def start(env: dict, *args: str) -> tuple[subprocess.Popen, Path]:
    log = _log(env)
    fh = open(log, "w")
    proc = subprocess.Popen([str(ROOT / "bin" / "rehearse"), *args], env=env, cwd=ROOT, stdout=fh,
                            stderr=subprocess.STDOUT, start_new_session=True)
    fh.close()
    return proc, log


def in_rehearsal(env: dict, *cmd: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run a command in the rehearsal's configuration (bin/rehearse --env), e.g. `make status`."""
    return subprocess.run([str(ROOT / "bin" / "rehearse"), "--env", *cmd], env=env, cwd=ROOT, text=True,
                          capture_output=True, timeout=timeout)


def pyhelpers_cmd(*args: str) -> list[str]:
    return [str(ROOT / ".venv" / "bin" / "python"), "-m", "pyhelpers", *args]


def wait_for(what: str, cond, timeout: float = 600, proc: subprocess.Popen | None = None, log: Path | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the rehearsal ended (exit {proc.returncode}) before {what}:\n"
                                 + (log.read_text(errors="replace")[-4000:] if log else ""))
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}" + (f":\n{log.read_text(errors='replace')[-4000:]}" if log else ""))


def event_seen(run: Run, kind: str, since: int = 0, **fields) -> bool:
    """An event of `kind` with these fields among the run's events from index `since` on."""
    return any(e.get("kind") == kind and all(e.get(k) == v for k, v in fields.items()) for e in run.events()[since:])


def kill_driver(run: Run) -> int:
    """SIGKILL the driver (the lock holder) alone, as the OOM killer would. Returns its pid."""
    holder = run.lock_holder()
    assert holder, "no driver holds the lock"
    from pyhelpers.procs import procfs

    os.kill(holder["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and procfs.is_alive(holder["pid"]):
        time.sleep(0.05)
    return holder["pid"]


def recorded_groups(run: Run) -> dict[str, int]:
    """{service: pgid} of every pidfile of the run."""
    from pyhelpers.procs.groups import records

    return {rec.name: rec.pgid for rec in records(run.run_dir / "pids")}


def running(run: Run, name: str, program: str) -> int | None:
    """The process group of service `name` once it runs `program` (past procs' start gate, which
    execs it only after the driver wrote its pidfile), else None."""
    from pyhelpers.procs import procfs
    from pyhelpers.procs.groups import records

    rec = next((r for r in records(run.run_dir / "pids") if r.name == name), None)
    stat = procfs.read_stat(rec.pid) if rec else None
    return rec.pgid if stat is not None and stat.comm == program else None


def group_alive(pgid: int) -> bool:
    from pyhelpers.procs import procfs

    return bool(procfs.group_members(pgid))


def assert_stopped(groups: dict[str, int], by: str = "the resume") -> None:
    for name, pgid in groups.items():
        assert not group_alive(pgid), f"{name} (pgid {pgid}) survived {by}"


@contextlib.contextmanager
def frozen(groups: dict[str, int]):
    """SIGSTOP these process groups for the block, SIGCONT after: a killed driver's orphans (a
    converter mid-export, say) keep writing, which would blur what a command under test wrote."""
    for pgid in groups.values():
        os.killpg(pgid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pgid in groups.values():
            try:
                os.killpg(pgid, signal.SIGCONT)
            except ProcessLookupError:
                pass


def file_digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(Path(root).rglob("*")) if p.is_file() and not p.is_symlink()}


def outcome(run: Run, rounds: int = 2) -> dict:
    """What must equal an uninterrupted rehearsal's: the final bank, the summaries' episode
    counts, every round's bank, and the checkpoint and HF export bytes."""
    def load(p: Path) -> dict:
        return json.loads(p.read_text())

    out = {"final_bank": hashlib.sha256((run.run_dir / "skillbank-final.json").read_bytes()).hexdigest()}
    for r in range(rounds):
        val, gate = load(run.round_dir(r) / "val" / "summary.json"), load(run.round_dir(r) / "gate" / "summary.json")
        out[f"r{r}"] = {"val_n": val["n"], "val_episodes": val["episodes"], "gate": gate["episodes"],
                        "bank": hashlib.sha256((run.round_dir(r) / "skillbank.json").read_bytes()).hexdigest(),
                        "compiled": hashlib.sha256((run.round_dir(r) / "compiled.json").read_bytes()).hexdigest(),
                        "spool": sorted(p.name for p in (run.round_dir(r) / "spool").glob("*.json"))}
    out["weights"] = file_digests(run.save_dir)
    return out


def newest_complete(run: Run) -> int | None:
    from pyhelpers.run import checkpoints

    return checkpoints.newest_complete(run.save_dir / "megatron")


def rows(path: Path) -> list[dict]:
    """The rows of a CSV file (the report's tables)."""
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


class Hook:
    """A webhook receiver on loopback: records (path with its query, body) of every POST; with hang=True it
    never answers (until closed)."""

    def __init__(self, hang: bool = False):
        self.posts: list[tuple[str, dict]] = []
        self.closing = threading.Event()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                hook.posts.append((self.path, body))
                if hang:
                    hook.closing.wait(120)
                    return
                reply(self, 200, b'{"ok": true}')

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self):
        self.closing.set()
        self.server.shutdown()


def ray_temp_dir(env: dict) -> str:
    """The Ray temp dir of the rehearsal run of this environment."""
    from pyhelpers.config.load import load

    return load({**env, "RUN_NAME": env.get("RUN_NAME", "rehearsal")}).ray_temp_dir


def own_ports() -> dict[str, str]:
    """Ports of its own for a rehearsal that may run beside others (xdist workers, another
    checkout's tests, a user's `make rehearse`): SHOPSIM_PORT, EVAL_PORT, RAY_DASHBOARD_PORT and a
    block for RAY_PORT and the ports Ray takes above it, each claimed machine-wide
    (support/port_claims.py) below the kernel's ephemeral range (so a kernel-chosen port, a Ray
    worker's say, cannot take one before its service binds it)."""
    from pyhelpers.config.ray_ports import SPAN
    from support.port_claims import claim_block, claim_port

    return {"RAY_PORT": str(claim_block(SPAN)), "RAY_DASHBOARD_PORT": str(claim_port()),
            "SHOPSIM_PORT": str(claim_port()), "EVAL_PORT": str(claim_port())}
