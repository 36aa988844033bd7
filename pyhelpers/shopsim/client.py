"""Async ShopSimulator client (httpx) for hundreds of concurrent episodes on one event loop.

One `ShopSimClient` is shared by every episode of a process (the eval runner, or the rollout plugin
inside slime's asyncio loop). Each request has its own timeout; httpx's connection pool is sized so
that hundreds of episodes never wait on each other for a socket.

Slots: pack_api pops a free environment slot on `reset` (no env_idx), frees it by itself when an
answer says `over`, and otherwise only on `release_one`. `episode_slot(task_idx)` wraps that:

    async with ShopSimClient(url) as client:
        async with client.episode_slot(task.shopsim_idx) as slot:
            step = await slot.interact(response_text)

It releases the slot on every exit path — normal, exception, timeout, `asyncio.CancelledError`
(slime cancels over-sampled requests) — and never after the server said `over` (a second release
could free a slot another episode has taken since). A cancelled reset or interact is not abandoned:
the server finishes it anyway, so the release waits for that answer first (shielded, in the
background if cancelled again) and `aclose()` waits for those background releases.

A reset that fails after the server popped a slot (a bad task index: pack_api pops first, then
the reset raises and nothing frees that slot) leaves a slot whose number nobody knows. Every
failed reset except the no-slot refusal counts as one such `unknown_slots` (as does a slot that
cannot be released safely, above); `free_unknown()` gives them back with release_all once nothing
of this client is in flight (the caller must be the simulator's only user), and `pool_size` makes
release_one refuse an index beyond the pool (pack_api adds any int to its free set, and a later
reset would pop it and fail).

A restarted simulator hands out the same slot numbers again, so a slot number from before the
restart may be another episode's after it, and an interact sent with it would act in that
episode's env. The episode cannot learn of the restart in time (a starved client sends it as if
nothing happened), so the simulator refuses it: our launcher names its instance in every answer
(protocol.INSTANCE_HEADER), each slot remembers the instance of its reset, and its interact and
release carry it; another instance answers StaleSlotError without touching an env.

The same holds within one instance: pack_api frees the slot of an episode-ending interact before
it serialises the answer (pack_api.py:112-113, then :120 outside its try), so an HTTP 500 may
come after the slot was freed -- and handed to another episode by the time this one exits. Our
launcher's fence gives each reset's slot a lease (protocol.LEASE_HEADER), carried like the
instance, and refuses a request whose lease pack_api no longer holds (FreedSlotError): the slot is
then left alone. Without the fence (SHOPSIM_LAUNCHER's own server) a slot whose interact got a 5xx
is never released nor stepped again: it counts in `unknown_slots` (below).

Retries: httpx's transport retries failed *connects* (`retries=`); a release that fails is retried
a few times here (a leaked slot is expensive; three tries in a loop is clearer than a dependency).
Nothing else is retried: the episode runner decides (an infra error is never a policy failure).
Stdlib + httpx only at import: the rollout plugin uses this inside slime's environment.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from typing import Any

import httpx

from pyhelpers.shopsim import actions, answers, protocol
from pyhelpers.shopsim.protocol import NoSlotError, ShopSimError, TransportError  # noqa: F401  (re-exported)

log = logging.getLogger(__name__)

RELEASE_TRIES = 3


class ShopSimClient:
    """Talks to one ShopSimulator at `base_url` (e.g. http://127.0.0.1:5700).

    reset_timeout must exceed the server's own wait for a free slot (pack_api: 5 tries × 5 s), or a
    reset that gives up client-side may still pop a slot server-side that nobody can release.
    max_slots, when set, caps the slots this client holds at once (episode_slot waits for one).
    pool_size, when set, is the server's pool (SHOPSIM_SLOTS): release_one refuses indices beyond it.
    token, when set, is sent as `Authorization: Bearer` (the gate of a multi-node run, shopsim/gate.py).
    """

    def __init__(self, base_url: str, *, timeout: float = 30.0, reset_timeout: float = 60.0,
                 release_timeout: float = 10.0, connect_timeout: float = 5.0, max_connections: int = 512,
                 max_slots: int | None = None, pool_size: int | None = None, connect_retries: int = 2,
                 transport: httpx.AsyncBaseTransport | None = None, token: str = ""):
        self.url = base_url.rstrip("/") + protocol.API_PATH
        self.timeout, self.reset_timeout, self.release_timeout = timeout, reset_timeout, release_timeout
        self._connect_timeout = connect_timeout
        limits = httpx.Limits(max_connections=max_connections,
                              max_keepalive_connections=max_connections, keepalive_expiry=30.0)
        self._http = httpx.AsyncClient(
            limits=limits, trust_env=False,  # loopback service (or the run's gate): never through a proxy
            # token: ShopSimulator's gate on a multi-node run (pyhelpers/shopsim/gate.py) wants the run's
            headers={"Authorization": f"Bearer {token}"} if token else None,
            transport=transport or httpx.AsyncHTTPTransport(retries=connect_retries, limits=limits),
            timeout=httpx.Timeout(timeout, connect=connect_timeout))
        self._slots = asyncio.Semaphore(max_slots) if max_slots else None
        self._background: set[asyncio.Task] = set()
        self.held: set[int] = set()  # env_idx of the slots episode_slot holds now
        self.pool_size = pool_size
        self.unknown_slots = 0  # slots perhaps taken that nobody can release one by one (see module doc)
        self.pool_errors = 0  # resets that popped a slot number beyond the server's pool (see reset)
        self._active = 0  # episode slots between their reset and the end of their release

    # ------------------------------------------------------------------ plumbing
    async def __aenter__(self) -> ShopSimClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def drain(self, timeout: float | None = None) -> int:
        """Wait (bounded) for releases still running in the background, e.g. those of cancelled
        episodes. Returns how many are still running after the wait."""
        if self._background:
            await asyncio.wait(set(self._background), timeout=timeout or self.reset_timeout + 30)
        return len(self._background)

    async def aclose(self, drain_timeout: float | None = None) -> None:
        """Wait for background releases (bounded), then close the connections."""
        await self.drain(drain_timeout)
        await self._http.aclose()

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("background slot release failed: %s", task.exception())

    async def _post(self, payload: dict, timeout: float, instance: str | None = None, lease: str | None = None) -> Any:
        """The answer's JSON. `instance` and `lease`: the simulator instance the request's slot came
        from and the fence's lease of it (our launcher's fence refuses the request when another
        instance answers or the lease is gone: protocol.INSTANCE_HEADER, LEASE_HEADER)."""
        return (await self._post_tagged(payload, timeout, instance, lease))[0]

    async def _post_tagged(self, payload: dict, timeout: float, instance: str | None = None,
                           lease: str | None = None) -> tuple[Any, httpx.Headers]:
        """The answer's JSON and headers (the fence's INSTANCE_HEADER and LEASE_HEADER among them)."""
        action = payload.get("action", "")
        t = httpx.Timeout(timeout, connect=min(self._connect_timeout, timeout), pool=timeout)
        headers = {name: value for name, value in ((protocol.INSTANCE_HEADER, instance), (protocol.LEASE_HEADER, lease)) if value}
        try:
            resp = await self._http.post(self.url, json=payload, timeout=t, headers=headers)
        except httpx.TimeoutException as exc:
            raise TransportError(f"no answer within {timeout:g} s ({type(exc).__name__})", action=action) from exc
        except httpx.HTTPError as exc:
            raise TransportError(f"{type(exc).__name__}: {exc} ({self.url})", action=action) from exc
        if resp.status_code != 200:
            ctype = resp.headers.get("Content-Type", "")
            raise protocol.HTTPStatusError(protocol.http_status_message(resp.status_code, ctype, resp.text, self.url),
                                    status=resp.status_code, action=action,
                                    from_shopsim=protocol.is_shopsim_answer(resp.status_code, ctype, resp.text,
                                                                     resp.headers.get(protocol.INSTANCE_HEADER)))
        try:
            return resp.json(), resp.headers
        except ValueError as exc:
            raise protocol.ProtocolError(f"answer is not JSON: {resp.text[:200]}", action=action) from exc

    # ------------------------------------------------------------------ the five requests
    async def reset(self, task_idx: int) -> protocol.ResetResult:
        """Start task `task_idx` in a slot the server picks. NoSlotError when the pool is exhausted.
        The caller owns the returned slot (env_idx, of simulator `instance`); prefer episode_slot().

        pack_api answers 'list index out of range' both to a task index beyond its goal list and when
        the slot it popped is a number beyond its pool -- one another client's release_one put in its
        free set (pack_api.py:81-83), failing at envs[E] (:109). Only a second reset tells them apart:
        if it starts the task, the first failure was the pool's (counted in `pool_errors`, no task
        error); if it fails the same way, BadTaskIndex names both causes."""
        try:
            return await self._reset_once(task_idx)
        except protocol.BadTaskIndex:
            pass
        try:
            started = await self._reset_once(task_idx)
        except protocol.BadTaskIndex:
            self.unknown_slots += 1  # the first reset's pop (the caller counts the second's)
            raise protocol.BadTaskIndex(
                f"server error: {protocol.BAD_INDEX_ERROR}, twice: ShopSimulator has no task index {task_idx}, unless its "
                "free list holds slot numbers beyond its pool (another client's release_one of such a number, "
                "pack_api.py:81-83; restart ShopSimulator to clear it); a slot was taken",
                action="reset", server_message=protocol.BAD_INDEX_ERROR) from None
        except NoSlotError as exc:  # not "nothing taken": the first reset may have popped a real slot
            raise ShopSimError(f"server error: {protocol.BAD_INDEX_ERROR}, then no free slot for a second reset of task "
                               f"{task_idx} (sent because a slot number beyond the pool answers the same): the first "
                               "may have taken a slot", action="reset", server_message=exc.server_message) from exc
        except BaseException:
            self.unknown_slots += 1  # the first failure may have popped a real slot
            raise
        self.pool_errors += 1
        log.warning("ShopSimulator's free list held a slot number beyond its pool (another client's release_one of "
                    "it, pack_api.py:81-83): a reset popped it and failed at envs[that number]; task %d exists and "
                    "started in slot %d on the second reset", task_idx, started.env_idx)
        return started

    async def _reset_once(self, task_idx: int) -> protocol.ResetResult:
        body, headers = await self._post_tagged(protocol.reset_payload(task_idx), self.reset_timeout)
        return replace(protocol.parse_reset(body), instance=headers.get(protocol.INSTANCE_HEADER), lease=headers.get(protocol.LEASE_HEADER))

    async def _interact(self, env_idx: int, response_text: str, *, normalize: bool = True,
                        instance: str | None = None, lease: str | None = None) -> protocol.StepResult:
        """Send the model's text (as actions.wire_response makes it pack_api-parseable). With the
        slot's `instance` and `lease`, a simulator that restarted or freed the slot since refuses
        it unseen (StaleSlotError, FreedSlotError). Private: pack_api steps any slot number it is
        given, held or free (pack_api.py:109), so only EpisodeSlot.interact calls this, for a slot
        it still holds."""
        wire = actions.wire_response(response_text, normalize=normalize)
        return protocol.parse_interact(await self._post(protocol.interact_payload(env_idx, wire), self.timeout, instance, lease))

    async def release_one(self, env_idx: int, instance: str | None = None) -> str:
        """Free slot env_idx. An index beyond pool_size is refused: pack_api would add it to its
        free set (pack_api.py:81-83) and a later reset would pop it and fail on it. (A slot a
        reset of this client was given is released unchecked: the server just proved it exists.)"""
        if self.pool_size is not None and env_idx >= self.pool_size:
            raise ValueError(f"slot {env_idx} is beyond the pool of {self.pool_size} (SHOPSIM_SLOTS): pack_api would "
                             "add it to its free slots and a later reset would fail on it")
        return await self._release_one(env_idx, instance)

    async def _release_one(self, env_idx: int, instance: str | None = None, lease: str | None = None) -> str:
        return protocol.parse_message(await self._post(protocol.release_one_payload(env_idx), self.release_timeout, instance, lease),
                               "release_one")

    async def release_all(self) -> str:
        """Frees EVERY slot, including other clients' — only for a server nobody else uses."""
        return protocol.parse_message(await self._post(protocol.release_all_payload(), self.release_timeout), "release_all")

    async def probe(self, timeout: float | None = None) -> bool:
        """True when the server answers the no-slot probe (consumes no slot); False when nothing
        answers yet. Any other answer will not change by waiting: UnusableServer, as NotShopSim
        (another program answers) or ShopSimRefused (ShopSimulator answers with an error)."""
        try:
            body = await self._post(protocol.probe_payload(), timeout or self.release_timeout)
        except protocol.HTTPStatusError as exc:  # an answer, so a server; pack_api itself always says 200
            if exc.status == 401:  # the run's gate (multi-node), refusing this client's token: say so
                raise
            raise answers.unusable_error_answer(exc) from None
        except TransportError:
            return False
        except protocol.ProtocolError as exc:  # HTTP 200 that is not JSON
            raise answers.not_shopsim(exc) from None
        return answers.probe_answered(body)

    # ------------------------------------------------------------------ slots
    async def free_unknown(self) -> int:
        """release_all for the slots failed resets may have taken (`unknown_slots`), but only when
        no episode slot of this client is in flight; returns how many were counted (0: nothing
        done). Only for a client that is the simulator's only user (release_all frees every slot)."""
        if not self.unknown_slots or self._active or self._background:
            return 0
        count = self.unknown_slots
        await self.release_all()
        self.unknown_slots = 0
        log.info("released all ShopSimulator slots: %d failed resets may have taken one each", count)
        return count

    def episode_slot(self, task_idx: int) -> EpisodeSlot:
        """Async context manager: reset on enter, release on every exit (see module doc)."""
        return EpisodeSlot(self, task_idx)

    async def _release(self, env_idx: int, instance: str | None = None, lease: str | None = None) -> bool:
        """True when released; False when the fence says the slot is not ours any more."""
        last: ShopSimError | None = None
        for attempt in range(RELEASE_TRIES):
            try:
                await self._release_one(env_idx, instance, lease)
                return True
            except protocol.SlotNotHeld:
                return False  # restarted, or freed since: this number is not ours to free any more
            except ShopSimError as exc:
                last = exc
                await asyncio.sleep(0.2 * (attempt + 1))
        log.error("slot %s not released after %d tries: %s", env_idx, RELEASE_TRIES, last)
        raise last  # type: ignore[misc]


class EpisodeSlot:
    """One slot for one episode. Use `interact` through it so that `over` is tracked."""

    def __init__(self, client: ShopSimClient, task_idx: int):
        self.client, self.task_idx = client, task_idx
        self.reset: protocol.ResetResult | None = None
        self.env_idx: int | None = None
        self.over = False
        self.released = False
        self.maybe_freed = False  # a 5xx answered an interact and no lease says whether the server freed it
        self.wait_s = 0.0  # time from entering until the slot was ours (semaphore + reset)
        self.release_error: ShopSimError | None = None
        self._inflight: asyncio.Task | None = None
        self._sem_held = False

    async def __aenter__(self) -> EpisodeSlot:
        t0 = time.monotonic()
        if self.client._slots is not None:
            await self.client._slots.acquire()
            self._sem_held = True
        self.client._active += 1  # until _release_when_safe ends (_finish runs exactly once)
        try:
            self.reset = await self._track(self.client.reset(self.task_idx))
        except BaseException as exc:
            await self._finish(reset_failed=True, wait=not isinstance(exc, asyncio.CancelledError))
            raise
        self.env_idx = self.reset.env_idx
        self.client.held.add(self.env_idx)
        self.wait_s = time.monotonic() - t0
        return self

    async def __aexit__(self, exc_type, exc, tb) -> None:
        await self._finish(wait=exc_type is None or not issubclass(exc_type, asyncio.CancelledError))

    @property
    def lease(self) -> str | None:
        """The fence's lease of this slot (None: no fence in front of the simulator)."""
        return self.reset.lease if self.reset else None

    async def interact(self, response_text: str, *, normalize: bool = True) -> protocol.StepResult:
        if self.over or self.released or self.maybe_freed or self.env_idx is None:
            raise ShopSimError("episode slot is closed", action="interact")
        instance = self.reset.instance if self.reset else None
        try:
            step = await self._track(self.client._interact(self.env_idx, response_text, normalize=normalize,
                                                           instance=instance, lease=self.lease))
        except protocol.SlotNotHeld:
            self._mark_over()  # restarted or freed since: the number may be someone else's, never release it
            raise
        except protocol.HTTPStatusError as exc:
            self.maybe_freed = self.lease is None and answers.may_have_freed(exc)
            raise
        if step.over:
            self._mark_over()
        return step

    def _mark_over(self) -> None:
        self.over = True  # the server freed the slot itself: never release it again
        self.client.held.discard(self.env_idx)

    async def _track(self, coro):
        """Run a request as a task we keep a handle on, so a cancellation leaves it running and the
        release can wait for the server's answer instead of racing it."""
        self._inflight = asyncio.ensure_future(coro)
        return await asyncio.shield(self._inflight)

    async def _finish(self, *, reset_failed: bool = False, wait: bool = True) -> None:
        """Release (or not) in a background task. Wait for it unless the episode was cancelled: a
        cancelled caller must return promptly (slime gathers its cancelled tasks), so the release
        then finishes in the background and ShopSimClient.drain()/aclose() waits for it."""
        job = self.client._spawn(self._release_when_safe(reset_failed))
        if not wait:
            return
        try:
            await asyncio.shield(job)
        except asyncio.CancelledError:
            if not job.done():
                raise  # cancelled while releasing: the job goes on in the background
        except ShopSimError:
            pass  # recorded in release_error and logged; never masks the episode's own outcome

    async def _release_when_safe(self, reset_failed: bool) -> None:
        try:
            inflight = self._inflight
            if inflight is not None and not inflight.done():
                await asyncio.wait([inflight], timeout=self.client.reset_timeout)
            answer = failure = None
            if inflight is not None and inflight.done() and not inflight.cancelled():
                failure = inflight.exception()
                answer = inflight.result() if failure is None else None
            if reset_failed:
                if answer is None:
                    if not answers.refused(inflight):
                        self.client.unknown_slots += 1  # the server may have popped a slot first
                    return
                # The reset was cancelled but the server still handed us a slot.
                self.reset, self.env_idx = answer, answer.env_idx
            elif getattr(answer, "over", False):
                self._mark_over()
            if self.over or self.released or self.env_idx is None:
                return
            if self.maybe_freed or (self.lease is None and answers.may_have_freed(failure)):
                # no fence to ask: releasing might free another episode's slot, keeping it leaks one
                self.maybe_freed = True
                self.client.unknown_slots += 1
                self.client.held.discard(self.env_idx)
                return
            try:
                released = await self.client._release(self.env_idx, self.reset.instance if self.reset else None,
                                                      self.lease)
            except ShopSimError as exc:
                self.release_error = exc
                raise
            if not released:
                self._mark_over()  # the fence: the simulator freed it itself (or restarted)
                return
            self.released = True
            self.client.held.discard(self.env_idx)
        finally:
            self.client._active -= 1
            if self._sem_held:
                self._sem_held = False
                self.client._slots.release()

