"""The project's ShopSimulator launcher (M6) and the `pyhelpers shopsim` commands the driver uses."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest
from conftest import FAKES, ROOT, run_pyhelpers
from fakes.procs import free_port, stop_proc
from fakes.shop_fixture import write_shop_fixture

from pyhelpers.config import load
from pyhelpers.launch import shopsim_server

pytestmark = pytest.mark.heavy  # the ShopSimulator launcher as a process


def test_launcher_sets_pool_port_seed_and_retries_before_the_envs_are_built(toolkit_env, tmp_path):
    fx = write_shop_fixture(tmp_path / "shop", n_tasks=4, n_eval=0)
    port, record = free_port(), tmp_path / "record.json"
    env = {**toolkit_env, "SHOPSIM_DIR": str(FAKES / "shopsim_checkout"), "SHOPSIM_PORT": str(port),
           "SHOPSIM_SLOTS": "12", "SHOPSIM_EPISODE_CONCURRENCY": "8", "EVAL_CONCURRENCY": "8",
           "SHOPSIM_SEED": "77", "SHOPSIM_RESET_RETRIES": "2", "SHOPSIM_RESET_DELAY": "0.1"}
    argv = shopsim_server.shopsim(load.load(env))
    assert argv[0] == "python3" and argv[1].endswith("pyhelpers/shopsim/launcher.py")
    proc = subprocess.Popen([sys.executable, *argv[1:]], cwd=ROOT, start_new_session=True,
                            env={**env, "FAKE_PACK_API_RECORD": str(record), "FAKE_SHOPSIM_DIR": str(FAKES),
                                 "FAKE_SHOPSIM_TASKS": str(fx["server_file"])},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        probe = ["shopsim", "probe", "--url", url]
        for _ in range(100):
            if run_pyhelpers(probe, env).returncode == 0:
                break
        else:
            raise AssertionError(proc.stderr.read1().decode() if proc.poll() is not None else "never answered")
        got = json.loads(record.read_text())
        assert (got["env_max_num"], got["max_retries"], got["retry_delay"]) == (12, 2, 0.1)
        # every slot's simulator draws its prices from a freshly seeded RNG: one world, 12 times
        assert got["slot_draws"] == [random.Random(77).random()] * 12, "each slot's prices drawn after seeding"
        assert (got["host"], got["port"]) == ("127.0.0.1", port)
        assert got["cwd"].endswith("shop_env/shop_env")
        assert got["fenced"], "the launcher must put its fence (fence()) in front of pack_api's app"
        assert got["leased"], "the fence must see pack_api's pops (free_env_index as LeasedSlots)"
        released = run_pyhelpers(["shopsim", "release-all", "--url", url], env)
        assert released.returncode == 0 and "All environments" in released.stdout
    finally:
        stop_proc(proc)


def test_launcher_names_a_missing_checkout(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "pyhelpers/shopsim/launcher.py"), "--shopsim-dir", str(tmp_path),
                        "--host", "127.0.0.1", "--port", "1", "--slots", "1", "--seed", "1", "--reset-retries", "1",
                        "--reset-delay", "1"], capture_output=True, text=True)
    assert r.returncode == 1 and "set SHOPSIM_DIR" in r.stderr


def test_probe_of_a_dead_port_fails_with_exit_1(toolkit_env):
    r = run_pyhelpers(["shopsim", "probe", "--url", f"http://127.0.0.1:{free_port()}"], toolkit_env)
    assert r.returncode == 1 and "Traceback" not in r.stderr


def test_every_slot_plays_a_task_with_the_same_prices_and_price_limit(toolkit_env, tmp_path):
    """Upstream builds one simulator per slot, each drawing prices and price limits from the shared
    RNG in turn (pack_api.py:132-141; engine.py:186, goal.py:70): seeded once, a task's price limit
    would depend on the slot it lands in, i.e. on timing. The launcher makes every slot identical."""
    import asyncio
    import contextlib

    from pyhelpers.shopsim import actions
    from pyhelpers.shopsim.client import ShopSimClient

    fx = write_shop_fixture(tmp_path / "shop", n_tasks=4, n_eval=0)
    task = next(t for t in fx["tasks"] if t["asin"].endswith("1"))  # a product with a price range
    port, slots_n = free_port(), 6
    env = {**toolkit_env, "SHOPSIM_DIR": str(FAKES / "shopsim_checkout"), "SHOPSIM_PORT": str(port),
           "SHOPSIM_SLOTS": str(slots_n), "SHOPSIM_EPISODE_CONCURRENCY": "4", "EVAL_CONCURRENCY": "4",
           "SHOPSIM_SEED": "5", "SHOPSIM_RESET_RETRIES": "2", "SHOPSIM_RESET_DELAY": "0.1"}
    argv = shopsim_server.shopsim(load.load(env))
    proc = subprocess.Popen([sys.executable, *argv[1:]], cwd=ROOT, start_new_session=True,
                            env={**env, "FAKE_PACK_API_RECORD": str(tmp_path / "record.json"),
                                 "FAKE_SHOPSIM_DIR": str(FAKES), "FAKE_SHOPSIM_TASKS": str(fx["server_file"])},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"

    async def buy_on_every_slot():
        async with ShopSimClient(url) as c:
            for _ in range(100):
                if await c.probe():
                    break
                await asyncio.sleep(0.1)
            async with contextlib.AsyncExitStack() as stack:  # all slots at once: each one plays it
                held = [await stack.enter_async_context(c.episode_slot(task["idx"])) for _ in range(slots_n)]
                assert sorted(slot.env_idx for slot in held) == list(range(slots_n))
                seen = set()
                for slot in held:
                    for kind, arg in (("search", task["query"]), ("click", task["asin"]),
                                      ("click", task["options"][0]), ("click", "buy now")):
                        step = await slot.interact(actions.format_response("t", kind, arg))
                    assert step.done, step.raw
                    seen.add((step.goal["price_upper"], round(step.purchase["price"], 6),
                              step.reward_detail["r_price"]))
            return seen

    try:
        seen = asyncio.run(buy_on_every_slot())
        assert len(seen) == 1, f"the task's price or price limit depends on the slot: {sorted(seen)}"
    finally:
        stop_proc(proc)


def test_the_fence_refuses_a_request_of_an_earlier_instance_before_pack_api_sees_it():
    """A slot number from before a restart is another episode's after it (docs/shopsim_protocol.md)."""
    from fakes import fake_shopsim

    from pyhelpers.shopsim import launcher, protocol

    assert (launcher.INSTANCE_HEADER, launcher.STALE_SLOT_ERROR) == (protocol.INSTANCE_HEADER, protocol.STALE_SLOT_ERROR) \
        == (fake_shopsim.INSTANCE_HEADER, fake_shopsim.STALE_SLOT_ERROR)
    seen = []

    def pack_api(environ, start_response):  # a WSGI app standing for Flask's
        seen.append(environ.get("PATH_INFO"))
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b'{"result": {"message": "ok"}}']

    app = launcher.fence(pack_api, "now")

    def call(claimed):
        answer = {}
        environ = {"PATH_INFO": "/api/shop_agent", **({"HTTP_X_SHOPSIM_INSTANCE": claimed} if claimed else {})}
        body = b"".join(app(environ, lambda status, headers, exc_info=None: answer.update(status=status,
                                                                                          headers=dict(headers))))
        assert answer["status"] == "200 OK" and answer["headers"][protocol.INSTANCE_HEADER] == "now"
        return json.loads(body)

    assert call(None) == {"result": {"message": "ok"}} and call("now") == {"result": {"message": "ok"}}
    assert call("before") == {"result": {"error": protocol.STALE_SLOT_ERROR}}
    assert len(seen) == 2  # the stale request never reached pack_api


def test_the_fence_lets_through_only_requests_for_a_slot_pack_api_still_holds_for_them():
    """Issue 40 items 16 and 18: pack_api frees the slot of an episode-ending interact before it
    serialises the answer (pack_api.py:112-113, then :120 outside its try); when that fails Flask
    answers 500 and the client never learns of the `over`, and the next reset may hand the slot to
    another episode. The fence gives every popped slot a lease and refuses a release or interact
    whose lease pack_api no longer holds, before pack_api sees it."""
    import io

    from fakes import fake_shopsim

    from pyhelpers.shopsim import launcher, protocol

    assert (launcher.LEASE_HEADER, launcher.FREED_SLOT_ERROR) == (protocol.LEASE_HEADER, protocol.FREED_SLOT_ERROR) \
        == (fake_shopsim.LEASE_HEADER, fake_shopsim.FREED_SLOT_ERROR)
    free = launcher.LeasedSlots({0})
    seen = []

    def pack_api(environ, start_response):  # the slot rules of pack_api.py:81-83, :98, :112-113, :120
        data = json.loads(environ["wsgi.input"].read())
        seen.append(data["action"])
        if data["action"] == "reset":
            result = {"env_idx": free.pop(), "idx": data["idx"]}
        elif data["action"] == "interact":  # the episode ends: freed, then its answer fails to serialise
            free.add(data["env_idx"])
            start_response("500 INTERNAL SERVER ERROR", [("Content-Type", "text/html; charset=utf-8")])
            return [b"<title>500 Internal Server Error</title>"]
        else:
            free.add(data["env_idx"])
            result = {"message": f"Environment {data['env_idx']} has been released"}
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps({"result": result}).encode()]

    app = launcher.fence(pack_api, "now", free)

    def call(payload, lease=None):
        answer = {}
        environ = {"PATH_INFO": "/api/shop_agent", "wsgi.input": io.BytesIO(json.dumps(payload).encode()),
                   **({"HTTP_X_SHOPSIM_LEASE": lease} if lease else {})}
        body = b"".join(app(environ, lambda status, headers, exc_info=None: answer.update(status=status,
                                                                                          headers=dict(headers))))
        assert answer["headers"][protocol.INSTANCE_HEADER] == "now"
        return answer["status"], answer["headers"].get(protocol.LEASE_HEADER), body

    _, mine, _ = call({"action": "reset", "idx": 3})
    assert mine and call({"action": "interact", "env_idx": 0, "response": "x"}, mine)[0].startswith("500")
    _, theirs, _ = call({"action": "reset", "idx": 4})  # another episode gets the slot pack_api freed
    assert theirs and theirs != mine
    for action in ({"action": "release_one", "env_idx": 0}, {"action": "interact", "env_idx": 0, "response": "x"}):
        status, _, body = call(action, mine)
        assert status == "200 OK" and json.loads(body) == {"result": {"error": protocol.FREED_SLOT_ERROR}}
    assert seen == ["reset", "interact", "reset"], "a request of the old lease reached pack_api"
    assert b"has been released" in call({"action": "release_one", "env_idx": 0}, theirs)[2]
    assert json.loads(call({"action": "release_one", "env_idx": 0}, theirs)[2])["result"]["error"] == protocol.FREED_SLOT_ERROR
    assert not launcher.LeasedSlots({0}).holds("0:x") and not launcher.LeasedSlots({0}).holds(None)
