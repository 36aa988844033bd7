"""ShopSimulator's gate on a multi-node run (issue 28 item 6, docs/multinode.md): the simulator stays
on loopback; other nodes reach it only through the gate on NODE_ADDR, with the run's token.

Here the gate listens on 127.0.0.2 (another loopback address, standing for NODE_ADDR) on the same
port number as the simulator on 127.0.0.1, as on a real head."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest
from conftest import ROOT
from fakes.procs import start_fake_shopsim, stop, stop_proc
from fakes.shop_fixture import write_shop_fixture

from pyhelpers.launch import gate_auth
from pyhelpers.shopsim.client import ShopSimClient
from pyhelpers.shopsim.protocol import HTTPStatusError

pytestmark = pytest.mark.heavy  # starts the ShopSimulator stand-in and the gate as processes


@pytest.fixture(scope="module")
def gated(tmp_path_factory):
    d = tmp_path_factory.mktemp("gate")
    fixture = write_shop_fixture(d / "shop", n_tasks=8, n_eval=4)
    shop = start_fake_shopsim(fixture["server_file"], slots=4, seed=1, retries=2, delay=0.05)
    token_file = gate_auth.ensure_token(d / "run")
    gate = subprocess.Popen([sys.executable, "-m", "pyhelpers.shopsim.gate", "--listen", f"127.0.0.2:{shop.port}",
                             "--upstream", f"127.0.0.1:{shop.port}", "--token-file", str(token_file)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    url = f"http://127.0.0.2:{shop.port}"
    for _ in range(200):
        try:
            httpx.get(url, timeout=0.5)
            break
        except httpx.TransportError:
            time.sleep(0.05)
    yield url, token_file, gate
    stop_proc(gate)
    stop(shop)


async def _play(url: str, token: str) -> str:
    async with ShopSimClient(url, token=token, pool_size=4) as client:
        assert await client.probe()
        slot = await client.reset(0)
        return slot.observation[:40] if hasattr(slot, "observation") else str(slot)[:40]


def test_the_gate_forwards_with_the_runs_token_and_refuses_without(gated):
    url, token_file, gate = gated
    token = token_file.read_text().strip()
    assert token_file.stat().st_mode & 0o777 == 0o600 and token_file.parent.stat().st_mode & 0o777 == 0o700
    assert asyncio.run(_play(url, token))
    for bad in ("", "0" * 64):
        with pytest.raises(HTTPStatusError, match="HTTP 401 .*gate refused this client's token"):
            asyncio.run(_play(url, bad))
    assert gate.poll() is None
    # the token is never on the gate's command line (argv is visible in ps)
    assert token not in " ".join(open(f"/proc/{gate.pid}/cmdline").read().split("\0"))


def test_the_gate_never_binds_every_address(tmp_path):
    token_file = gate_auth.ensure_token(tmp_path)
    res = subprocess.run([sys.executable, "-m", "pyhelpers.shopsim.gate", "--listen", "0.0.0.0:1",
                          "--upstream", "127.0.0.1:1", "--token-file", str(token_file)],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "never every address" in res.stderr, res.stderr


def _backlog(addr: str) -> int:
    """The listen backlog of the socket listening on `addr` (host:port; ss prints it as a listener's Send-Q)."""
    out = subprocess.run(["ss", "-Hltn"], capture_output=True, text=True, timeout=30).stdout
    return next(int(f[2]) for f in map(str.split, out.splitlines()) if f[3] == addr)


def test_the_gate_takes_every_episode_connecting_at_once(gated):
    """A step's episodes connect at once (hundreds: SHOPSIM_SLOTS, each with its own keep-alive
    connection). With socketserver's default backlog of 5, a busy head dropped connections the
    plugin had sent a reset on (ReadError -> infra errors in a two-node rehearsal under load). The
    simulator behind it (Werkzeug's dev server) listens with a backlog of 128."""
    url, token_file, gate = gated
    assert _backlog(url.removeprefix("http://")) >= 128

    async def burst(n: int) -> list[int]:
        limits = httpx.Limits(max_connections=n, max_keepalive_connections=0)
        headers = {"Authorization": f"Bearer {token_file.read_text().strip()}"}
        async with httpx.AsyncClient(limits=limits, timeout=60) as client:
            # the probe: release_one without an env_idx (frees nothing)
            got = await asyncio.gather(*(client.post(f"{url}/api/shop_agent", json={"action": "release_one"},
                                                     headers=headers) for _ in range(n)), return_exceptions=True)
        return [r.status_code if isinstance(r, httpx.Response) else repr(r) for r in got]

    # the gate stopped (a head busy elsewhere) while 200 connect: each is answered once it runs again
    os.kill(gate.pid, signal.SIGSTOP)
    threading.Timer(2.0, os.kill, (gate.pid, signal.SIGCONT)).start()
    answers = asyncio.run(burst(200))
    assert answers == [200] * 200, sorted(set(map(str, answers)))


def test_the_one_job_modes_in_job_evaluation_reaches_the_simulator_through_the_gate(gated, toolkit_env):
    """Issue 44 (the two-node rehearsal in the one-job mode): a multi-node run's eval hook plays inside
    slime's RolloutManager, on whichever node holds it, and reaches ShopSimulator only through the
    head's gate. Its episodes' client sends the run's token, read from the run's token file where the
    hook runs (a path in slime.yaml, never the token); the settings never print it. (It was refused:
    the eval code's client sent no token.)"""
    from argparse import Namespace

    from pyhelpers.config import load
    from pyhelpers.evaluate import episode
    from pyhelpers.rollout import in_job_eval, settings
    from pyhelpers.run.layout import from_config

    url, token_file, _gate = gated
    token = token_file.read_text().strip()
    cfg = load.load(toolkit_env)
    values = {**settings.plugin_values(cfg, from_config(cfg), 0), "shopsim_url": url,
              "shopsim_token_path": str(token_file)}
    args = Namespace(**{settings.PREFIX + k: v for k, v in values.items()}, sglang_router_ip="127.0.0.1",
                     sglang_router_port=1)
    played = in_job_eval.eval_settings(settings.from_args(args), args)
    assert token not in repr(played) and token not in str(played.public())

    async def through_the_gate() -> str:
        ctx = episode.Context(played, builder=None)
        try:
            assert await ctx.shopsim_up()
            return str(await ctx.shopsim.reset(0))[:40]
        finally:
            await ctx.aclose()

    assert asyncio.run(through_the_gate())
