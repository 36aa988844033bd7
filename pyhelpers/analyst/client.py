"""OpenAI-compatible chat completions (DashScope compatible-mode by default), with retries.

`ChatClient.complete(messages, clock)` sends ``POST {base_url}/chat/completions`` with
``Authorization: Bearer <key>`` and returns the reply text. What happens on failure:

- 429, 408 and 5xx, timeouts, dropped connections, a body that is not a chat completion:
  retried (ANALYST_RETRIES) with exponential backoff and jitter; a Retry-After header is the
  minimum wait. When retries run out: `TransientError` (the batch stays pending).
- 401, 403, 404 and 400 ``Arrearage``: `FatalError`. They concern the key, its region, the
  account or the model name, so every further request would fail the same way: stop calling.
- Any other 4xx (400 InvalidParameter / DataInspectionFailed, 413 ...): `RejectedError`; the
  request itself is at fault, so the batch is recorded as rejected with the reason.

The key is held only in the request headers; it never appears in an exception or a log line
(reasons from the server are passed through `redact`). Each attempt runs in a daemon thread so
TERM or the drain deadline abandons it at once (`Stopped`), and ANALYST_TIMEOUT bounds the whole
attempt, not only each socket read.
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import requests

from pyhelpers.analyst.budget import Budget, Clock, Stopped

log = logging.getLogger("pyhelpers.analyst")

MAX_TOKENS = 2048  # reply cap: 16 proposals of <= ~1 kB each fit
TEMPERATURE = 0.0  # the same batch should get (nearly) the same proposals


class ChatError(Exception):
    """A request that did not produce a reply: `kind` for counters, `reason` for files/logs."""

    def __init__(self, kind: str, reason: str, retry_after: float | None = None):
        super().__init__(reason)
        self.kind, self.reason, self.retry_after = kind, reason, retry_after


class TransientError(ChatError):
    """Retries ran out on 429/5xx/timeouts/dropped connections; try the batch again later."""


class RejectedError(ChatError):
    """The endpoint refused this request for good (a 4xx about the request itself)."""


class FatalError(ChatError):
    """The endpoint refuses every request (key, region, account, model): stop calling."""


class _Retryable(ChatError):
    pass


@dataclass(frozen=True)
class Reply:
    content: str
    latency: float  # seconds of the successful attempt
    attempts: int


def backoff_delay(attempt: int, base: float, cap: float, retry_after: float | None = None,
                  rng: random.Random | None = None) -> float:
    """Wait before retry number `attempt` (0-based): exponential with "equal jitter" (half
    fixed, half random, so concurrent clients spread out but never retry at once), and never
    less than the server's Retry-After.

    Hand-written rather than tenacity: tenacity is not in the venv, and the waits here must
    honour Retry-After, pass the rate/spend budget before every attempt and be interruptible by
    TERM and the drain deadline (Clock.wait); with tenacity that is a custom wait, stop and
    before-hook, i.e. more code than these lines."""
    step = min(cap, base * (2 ** attempt))
    delay = step / 2 + (rng or random).uniform(0, step / 2)
    return max(delay, retry_after) if retry_after is not None else delay


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After as seconds (delta-seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_detail(resp: requests.Response) -> tuple[str, str]:
    """(code, message) from an OpenAI-style or DashScope-style error body."""
    try:
        body = resp.json()
    except ValueError:
        return "", resp.text[:200]
    err = body.get("error", body) if isinstance(body, dict) else {}
    if not isinstance(err, dict):
        return "", str(err)[:200]
    return str(err.get("code") or err.get("type") or ""), str(err.get("message") or "")[:200]


class ChatClient:
    def __init__(self, base_url: str, model: str, api_key: str, *, timeout: float, retries: int,
                 backoff: float, backoff_max: float, budget: Budget,
                 on_error: Callable[[str], None] | None = None):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.timeout, self.retries = model, timeout, retries
        self.backoff, self.backoff_max, self.budget = backoff, backoff_max, budget
        self._headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        self._key = api_key
        self.on_error = on_error or (lambda kind: None)

    def redact(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    def complete(self, messages: list[dict], clock: Clock) -> Reply:
        """The reply text for `messages`. Raises TransientError, RejectedError, FatalError,
        budget.CapReached or budget.Stopped."""
        body = json.dumps({"model": self.model, "messages": messages, "temperature": TEMPERATURE,
                           "max_tokens": MAX_TOKENS, "response_format": {"type": "json_object"}},
                          ensure_ascii=False).encode("utf-8")
        last: ChatError | None = None
        for attempt in range(self.retries + 1):
            self.budget.acquire(clock)
            started = time.monotonic()
            try:
                content = self._attempt(body, clock)
                return Reply(content, time.monotonic() - started, attempt + 1)
            except _Retryable as exc:
                self.on_error(exc.kind)
                last = exc
                if attempt == self.retries:
                    break
                delay = backoff_delay(attempt, self.backoff, cap=self.backoff_max, retry_after=exc.retry_after)
                log.warning("request failed (%s: %s); retry %d/%d in %.2fs", exc.kind, exc.reason,
                            attempt + 1, self.retries, delay)
                if not clock.wait(delay):
                    raise Stopped("stopped during backoff") from None
            except ChatError as exc:
                self.on_error(exc.kind)
                raise
        assert last is not None
        raise TransientError(last.kind, f"{last.reason} (gave up after {self.retries + 1} attempts)")

    def _attempt(self, body: bytes, clock: Clock) -> str:
        box: dict = {}

        def work():
            try:
                box["resp"] = requests.post(self.url, data=body, headers=self._headers,
                                            timeout=(min(10.0, self.timeout), self.timeout))
            except BaseException as exc:  # handed to the waiting thread
                box["exc"] = exc

        worker = threading.Thread(target=work, name="analyst-http", daemon=True)
        started = time.monotonic()
        worker.start()
        while worker.is_alive():
            worker.join(0.05)
            if clock.stopped():
                raise Stopped("stopped with a request in flight (abandoned, nothing written)")
            if time.monotonic() - started > self.timeout + 1.0:
                raise _Retryable("timeout", f"no reply within ANALYST_TIMEOUT={self.timeout:g}s")
        if "exc" in box:
            raise self._classify_exception(box["exc"])
        return self._classify_response(box["resp"])

    def _classify_exception(self, exc: BaseException) -> ChatError:
        if isinstance(exc, requests.Timeout):
            return _Retryable("timeout", f"no reply within ANALYST_TIMEOUT={self.timeout:g}s")
        if isinstance(exc, (requests.exceptions.InvalidURL, requests.exceptions.MissingSchema,
                            requests.exceptions.InvalidSchema)):
            return FatalError("config", f"bad ANALYST_BASE_URL: {self.redact(str(exc))[:200]}")
        if isinstance(exc, requests.RequestException):
            return _Retryable("connection", f"connection failed: {type(exc).__name__}")
        return _Retryable("connection", f"request failed: {type(exc).__name__}")

    def _classify_response(self, resp: requests.Response) -> str:
        status = resp.status_code
        if status == 200:
            try:
                content = resp.json()["choices"][0]["message"]["content"]
            except (ValueError, KeyError, IndexError, TypeError):
                raise _Retryable("bad_envelope", "HTTP 200 but the body is not a chat completion") from None
            if not isinstance(content, str):
                raise _Retryable("bad_envelope", "HTTP 200 but choices[0].message.content is not text")
            return content
        code, message = _error_detail(resp)
        what = self.redact(f"HTTP {status} {code}: {message}".strip())
        if status == 429 or status == 408 or status >= 500:
            kind = "http_429" if status == 429 else "http_5xx" if status >= 500 else "http_408"
            raise _Retryable(kind, what, parse_retry_after(resp.headers.get("Retry-After")))
        if status in (401, 403):
            raise FatalError("auth", f"{what} (check DASHSCOPE_API_KEY and that ANALYST_BASE_URL is "
                                     f"the key's region; 403 may mean the free quota is used up)")
        if status == 404:
            raise FatalError("not_found", f"{what} (check ANALYST_MODEL and ANALYST_BASE_URL)")
        if status == 400 and code.lower() == "arrearage":
            raise FatalError("arrearage", f"{what} (the Bailian account has an overdue payment)")
        raise RejectedError(f"http_{status}", what)
