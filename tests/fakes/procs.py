"""Start and stop the ShopSimulator and SGLang stand-ins as real processes on loopback ports.

    from fakes.procs import start_fake_shopsim, start_fake_sglang, stop
    shop = start_fake_shopsim(catalog_path, slots=48, seed=1)      # -> Proc(url, proc)
    sg = start_fake_sglang(tokenizer_dir, policy=policy_path)
    ...
    stop(shop); stop(sg)

Each child runs in its own session (process group); stop() ends that group (TERM, wait, KILL),
never anything by name. Ports are claimed machine-wide (free_port).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

FAKES = Path(__file__).resolve().parent


@dataclass
class Proc:
    url: str
    proc: subprocess.Popen
    port: int
    log: object = None  # the child's stderr (a temp file)

    def stderr(self) -> str:
        self.log.seek(0)
        return self.log.read()


def free_port() -> int:
    """A free loopback port for a program that takes its port as an argument, claimed for this
    test process machine-wide (tests/support/port_claims.py), so a parallel worker or another
    checkout never gets it too."""
    from support.port_claims import claim_port

    return claim_port()


def _post(url: str, body: dict, timeout: float = 2.0):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def _wait(proc: subprocess.Popen, log, ready, timeout: float) -> None:
    """Until ready(); `timeout` bounds a hang only (a stand-in that dies fails at once)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"stand-in exited with {proc.returncode}: {log.read()[-2000:]}")
        try:
            if ready():
                return
        except (OSError, urllib.error.URLError, ValueError):
            pass
        time.sleep(0.05)
    stop_proc(proc)
    raise RuntimeError("stand-in did not become ready")


def start_fake_shopsim(catalog: Path, *, slots: int = 48, seed: int = 1, retries: int = 5, delay: float = 5.0,
                       args: list[str] | None = None, port: int | None = None, timeout: float = 300.0,
                       fence: bool = True) -> Proc:
    """The fake as the toolkit serves ShopSimulator: behind the launcher's fence unless fence=False."""
    port = port or free_port()
    env = {**os.environ, "SHOPSIM_ENV_MAX_NUM": str(slots), "SHOPSIM_RESET_RETRIES": str(retries),
           "SHOPSIM_RESET_DELAY": str(delay)}
    log = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen([sys.executable, str(FAKES / "fake_shopsim.py"), "--host", "127.0.0.1", "--port",
                             str(port), "--seed", str(seed), "--tasks", str(catalog),
                             *(["--instance-fence"] if fence else []), *(args or [])],
                            env=env, stdout=subprocess.DEVNULL, stderr=log,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    _wait(proc, log, lambda: _post(url + "/api/shop_agent", {"action": "release_one"})["result"].get("error")
          == "No valid environment index provided", timeout)
    return Proc(url, proc, port, log)


def start_fake_sglang(model_path: Path, *, policy: Path | None = None, seed: int = 0, latency_ms: float = 0,
                      context_length: int = 32768, args: list[str] | None = None, timeout: float = 300.0) -> Proc:
    port = free_port()
    cmd = [sys.executable, str(FAKES / "fake_sglang.py"), "--model-path", str(model_path), "--tp-size", "1",
           "--dp-size", "1", "--host", "127.0.0.1", "--port", str(port), "--context-length", str(context_length),
           "--random-seed", str(seed), *(["--fake-policy", str(policy)] if policy else []),
           *(["--latency-ms", str(latency_ms)] if latency_ms else []), *(args or [])]
    log = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    _wait(proc, log, lambda: urllib.request.urlopen(url + "/health", timeout=1).status == 200, timeout)
    return Proc(url, proc, port, log)


def slots(shop: Proc) -> dict:
    """The fake's test-only pool view: {"max", "free", "taken": [...], "counts": {...}}."""
    with urllib.request.urlopen(shop.url + "/debug/slots", timeout=5) as resp:
        return json.loads(resp.read())


def stop_proc(proc: subprocess.Popen, grace: float = 5.0) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(grace)
        except ProcessLookupError:
            pass


def stop(p: Proc) -> None:
    stop_proc(p.proc)
    if p.log is not None:
        p.log.close()
