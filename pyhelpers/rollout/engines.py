"""Leave slime's SGLang engines idle when the rollout function returns.

slime aborts the engines at the end of a step (slime 624b824, sglang_rollout.py:339-371), but the
step's full-skill retries (retry.py) go on playing after that, and drain() cancels the ones that
run past their deadline: a cancelled /generate is only a closed connection, which SGLang notices
later. Under --colocate slime then releases the engines' memory as soon as the rollout function
returns (train.py:55-56 -> SGLangEngine.release_memory_occupation, sglang_engine.py:328-330:
flush_cache, then release, which SGLang asserts is called on an idle engine,
weight_updater.py:184-187) -- a request of ours still in flight there kills the job.

So after drain() nothing of ours is running any more, and this aborts every request left on each
engine the router lists and polls GET /v1/loads until it shows none, as slime's own abort does
(server_control.py:43-63). Bounded: after `timeout` seconds it logs and returns (slime's
flush_cache then retries for another 60 s before it gives up).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import httpx

log = logging.getLogger(__name__)


# The key names slime's own idle check reads, in its order (slime 624b824
# backends/sglang_utils/server_control.py:12-29, num_requests_from_load).
TOTAL_KEYS = ("num_reqs", "num_total_reqs", "total_reqs")
RUNNING_KEYS = ("num_running_reqs", "total_running_reqs")
WAITING_KEYS = ("num_waiting_reqs", "total_waiting_reqs")


def requests_in(load: Any) -> int | None:
    """Requests an engine still holds, from a /v1/loads answer (SGLang 0.5.15: {"loads": [per DP
    rank: num_running_reqs, num_waiting_reqs, ...]}; other versions: one of slime's other key
    names). None when the answer has a shape none of those names fits: unlike slime's
    num_requests_from_load, which counts such an answer as 0 requests (idle), an unknown shape
    proves nothing, and releasing the memory of an engine that is not idle kills the job."""
    if isinstance(load, list):
        counts = [requests_in(x) for x in load]
        return None if not counts or None in counts else sum(counts)  # type: ignore[arg-type]
    if not isinstance(load, dict):
        return None
    if "loads" in load:
        return requests_in(load["loads"])
    for key in TOTAL_KEYS:
        if _count(load.get(key)):
            return load[key]
    running = next((load[k] for k in RUNNING_KEYS if k in load), None)
    waiting = next((load[k] for k in WAITING_KEYS if k in load), None)
    if not (_count(running) or _count(waiting)):
        return None
    return (running if _count(running) else 0) + (waiting if _count(waiting) else 0)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


async def _workers(http: httpx.AsyncClient, router: str) -> list[str]:
    try:
        resp = await http.get(f"{router}/workers")
        resp.raise_for_status()
        return [str(w["url"]).rstrip("/") for w in resp.json()["workers"]] or [router]
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        log.warning("router %s did not list its engines (%s); aborting through the router", router, exc)
        return [router]


async def _until_idle(http: httpx.AsyncClient, url: str, deadline: float, interval: float) -> bool:
    while True:
        try:
            await http.post(f"{url}/abort_request", json={"abort_all": True})
            resp = await http.get(f"{url}/v1/loads?include=core")
            resp.raise_for_status()
            answer = resp.json()
        except (httpx.HTTPError, ValueError) as exc:
            log.warning("engine %s: abort or load query failed (%s)", url, exc)
            return False
        left = requests_in(answer)
        if left is not None and left <= 0:
            return True
        if time.monotonic() >= deadline:
            if left is None:
                log.warning("engine %s: /v1/loads answered %.200s, in which none of slime's key names (%s) "
                            "says how many requests it holds: not counted as idle", url, answer,
                            ", ".join(TOTAL_KEYS + RUNNING_KEYS + WAITING_KEYS))
            else:
                log.warning("engine %s still holds %d request(s) after aborting for the step's end", url, left)
            return False
        await asyncio.sleep(interval)
        interval = min(1.0, interval * 2)


async def abort_until_idle(router: str, timeout: float = 60.0) -> bool:
    """Abort what is left on every engine behind `router` and wait until each is idle. True when
    all reported idle within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=httpx.Timeout(10.0), trust_env=False) as http:
        urls = await _workers(http, router.rstrip("/"))
        done = await asyncio.gather(*(_until_idle(http, u, deadline=deadline, interval=0.05) for u in urls))
    return all(done)
