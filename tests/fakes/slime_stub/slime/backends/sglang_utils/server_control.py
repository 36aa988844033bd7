"""slime.backends.sglang_utils.server_control (624b824): abort every request of an engine and
wait until it is idle (server_control.py:43-67): POST {url}/abort_request {"abort_all": true},
GET {url}/v1/loads?include=core, count its requests (num_requests_from_load, :12-29), sleep and
repeat while any is left; a failing load query gives up (returns), as slime does.
Differs: slime sleeps ABORT_RETRY_INTERVAL_SECONDS = 3 s between rounds; the stand-in 0.1 s
(FAKE_SLIME_ABORT_INTERVAL), which changes only how long a test waits."""

import asyncio
import logging
import os

import httpx

logger = logging.getLogger(__name__)


def num_requests_from_load(load) -> int:
    if isinstance(load, list):
        return sum(num_requests_from_load(item) for item in load)
    if not isinstance(load, dict):
        return 0
    if "loads" in load:
        return num_requests_from_load(load["loads"])
    for key in ("num_reqs", "num_total_reqs", "total_reqs"):
        if isinstance(load.get(key), int):
            return load[key]
    running = load.get("num_running_reqs", load.get("total_running_reqs"))
    waiting = load.get("num_waiting_reqs", load.get("total_waiting_reqs"))
    return (running if isinstance(running, int) else 0) + (waiting if isinstance(waiting, int) else 0)


async def abort_server_until_idle(url: str, retry_interval: float | None = None) -> None:
    interval = float(os.environ.get("FAKE_SLIME_ABORT_INTERVAL", "0.1")) if retry_interval is None else retry_interval
    async with httpx.AsyncClient(timeout=30.0, trust_env=False) as http:
        while True:
            try:
                await http.post(f"{url}/abort_request", json={"abort_all": True})
            except Exception as exc:  # noqa: BLE001 - slime logs and goes on
                logger.warning("Failed to abort SGLang server at %s: %s", url, exc)
            try:
                resp = await http.get(f"{url}/v1/loads?include=core")
                resp.raise_for_status()
                left = num_requests_from_load(resp.json())
            except Exception as exc:  # noqa: BLE001
                logger.warning("Failed to get SGLang server load from %s: %s", url, exc)
                return
            if left <= 0:
                return
            await asyncio.sleep(interval)


async def abort_servers_until_idle(urls: list[str]) -> None:
    await asyncio.gather(*(abort_server_until_idle(url) for url in urls))
