"""Async client of SGLang's native /generate (token ids in, token ids + log-probs out) and /health.

Evaluation generates exactly as slime's rollouts do: POST /generate with `input_ids`,
`sampling_params` (max_new_tokens = ROLLOUT_MAX_RESPONSE_LEN, capped by the context budget) and
`return_logprob: true`. SGLang 0.5.x answers

    {"text": "...", "output_ids": [...],
     "meta_info": {"id": ..., "finish_reason": {"type": "stop"|"length"|"abort", ...},
                   "prompt_tokens": N, "completion_tokens": M, "cached_tokens": C,
                   "output_token_logprobs": [[logprob, token_id, null], ...], ...}}

(`output_token_logprobs` entries are (logprob, token_id, text-or-None) tuples from
TokenizerManager.detokenize_logprob_tokens; slime's sglang_rollout takes item[1] as the token and
item[0] as its log-prob, and so does this module). A request SGLang refuses (e.g. longer than the
server's context length) is HTTP 400 with {"error": {"message": ...}}. A transient failure (a
refused connection, 502/503/504/429 from the router) is sent again, a few times (TRANSIENT_*).

`parse_generate(body)` is transport-free, for callers that post through another client (slime's
http_utils.post in the plugin). Stdlib + httpx at import.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

log = logging.getLogger(__name__)

# Answers that say "not now" rather than "not this request": a router with no engine ready
# (503), a proxy or router that lost its engine (502/504), overload (429). slime's own post
# retries every failure 60 times, 1 s apart (slime 624b824, slime/utils/http_utils.py:165-198);
# here only these and a refused/reset connection, a few times: a 4xx is the request's fault and a
# read timeout already waited a whole generation.
TRANSIENT_STATUS = frozenset({429, 502, 503, 504})
TRANSIENT_ERRORS = (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ConnectTimeout)


class SGLangError(Exception):
    """The server did not generate (an infrastructure error, never a policy failure)."""


class SGLangUnavailable(SGLangError):
    """No answer: connection refused/reset, timeout, 5xx."""


class SGLangRejected(SGLangError):
    """The server refused the request (HTTP 4xx), e.g. prompt + max_new_tokens > context length."""


@dataclass(frozen=True)
class GenerateResult:
    text: str
    output_ids: list[int]
    logprobs: list[float] | None  # one per output id; None when return_logprob was false
    finish_reason: str  # "stop" | "length" | "abort" | ""
    finish_detail: dict = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    meta_info: dict = field(default_factory=dict, repr=False)

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"

    @property
    def aborted(self) -> bool:
        return self.finish_reason == "abort"

    def reply(self, decode) -> str:
        """The text without the stop token that ended it. slime samples with
        skip_special_tokens=False and no_stop_trim=True, so SGLang's `text` ends in the EOS text
        (sglang detokenizer_manager.py:171-200): the action, the spool and the next turn's
        history take the reply without it. `decode(ids)` is the policy tokenizer's."""
        matched = self.finish_detail.get("matched")
        if self.finish_reason == "stop" and isinstance(matched, int) and self.output_ids[-1:] == [matched]:
            tail = decode([matched])
            if tail and self.text.endswith(tail):
                return self.text[: -len(tail)]
        return self.text


def parse_generate(body: Any) -> GenerateResult:
    """One /generate answer (not a batch) as a GenerateResult; SGLangError when malformed."""
    if not isinstance(body, dict) or not isinstance(body.get("meta_info"), dict):
        raise SGLangError(f"not a /generate answer: {str(body)[:200]}")
    meta = body["meta_info"]
    finish = meta.get("finish_reason") or {}
    if isinstance(finish, str):
        finish = {"type": finish}
    pairs = meta.get("output_token_logprobs")
    if pairs is not None:
        try:
            ids = [int(item[1]) for item in pairs]
            logprobs = [float(item[0]) if item[0] is not None else 0.0 for item in pairs]
        except (TypeError, ValueError, IndexError) as exc:
            raise SGLangError(f"meta_info.output_token_logprobs malformed: {exc}") from exc
        top = body.get("output_ids")
        if top is not None and [int(t) for t in top] != ids:
            raise SGLangError("output_ids and output_token_logprobs disagree")
    else:
        ids, logprobs = [int(t) for t in body.get("output_ids") or []], None
    return GenerateResult(text=str(body.get("text", "")), output_ids=ids, logprobs=logprobs,
                          finish_reason=str(finish.get("type", "")), finish_detail=dict(finish),
                          prompt_tokens=int(meta.get("prompt_tokens", 0) or 0),
                          completion_tokens=int(meta.get("completion_tokens", len(ids)) or 0), meta_info=meta)


class SGLangClient:
    """One shared client per process; `timeout` bounds one generation (long responses take time)."""

    def __init__(self, base_url: str, *, timeout: float = 600.0, connect_timeout: float = 5.0,
                 max_connections: int = 512, transport: httpx.AsyncBaseTransport | None = None,
                 retries: int = 5, retry_delay: float = 1.0):
        self.base_url = base_url.rstrip("/")
        self.retries, self.retry_delay = retries, retry_delay
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._http = httpx.AsyncClient(limits=limits, trust_env=False, transport=transport,
                                       timeout=httpx.Timeout(timeout, connect=connect_timeout, pool=timeout))

    async def __aenter__(self) -> SGLangClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def generate(self, input_ids: list[int], sampling_params: dict, *, return_logprob: bool = True,
                       extra: dict | None = None, rid: str | None = None) -> GenerateResult:
        """POST /generate. sampling_params must hold max_new_tokens (never left to the server's default).

        rid: what the request is for (e.g. an evaluation episode's id). SGLang keys a request by its
        `rid` (its logs, /abort_request) and refuses one whose rid is still in flight ("Duplicate
        request ID detected": sglang 0.5.15.post1 tokenizer_manager.py:2886-2887, HTTP 400 from
        http_server.py:833-835), so each try of the POST sends `<rid>/<nonce>`: a try sent again
        after a 504 whose first is still generating is not refused as a duplicate."""
        if "max_new_tokens" not in sampling_params:
            raise ValueError("sampling_params needs max_new_tokens (= ROLLOUT_MAX_RESPONSE_LEN, capped)")
        payload = {"input_ids": list(input_ids), "sampling_params": dict(sampling_params),
                   "return_logprob": return_logprob, **(extra or {})}
        resp = await self._post_retrying("/generate", payload, rid=rid)
        if resp.status_code != 200:
            try:
                detail = resp.json().get("error", {}).get("message", resp.text)
            except (ValueError, AttributeError):
                detail = resp.text
            cls = SGLangRejected if 400 <= resp.status_code < 500 else SGLangUnavailable
            raise cls(f"/generate HTTP {resp.status_code}: {str(detail)[:300]}")
        try:
            body = resp.json()
        except ValueError as exc:
            raise SGLangError(f"/generate answer is not JSON: {resp.text[:200]}") from exc
        return parse_generate(body)

    async def _post_retrying(self, path: str, payload: dict, rid: str | None = None) -> httpx.Response:
        """POST, sent again after a transient failure (TRANSIENT_*), `retries` times at most; with a
        fresh `<rid>/<nonce>` on each try when rid is given."""
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            if rid is not None:
                payload = {**payload, "rid": f"{rid}/{uuid.uuid4().hex[:12]}"}
            try:
                resp = await self._http.post(self.base_url + path, json=payload)
            except TRANSIENT_ERRORS as exc:
                if last:
                    raise SGLangUnavailable(f"{path}: {type(exc).__name__}: {exc} ({attempt + 1} tries)") from exc
                why = type(exc).__name__
            except httpx.TimeoutException as exc:
                raise SGLangUnavailable(f"{path} gave no answer in time ({type(exc).__name__})") from exc
            except httpx.HTTPError as exc:
                raise SGLangUnavailable(f"{path}: {type(exc).__name__}: {exc}") from exc
            else:
                if resp.status_code not in TRANSIENT_STATUS or last:
                    return resp
                why = f"HTTP {resp.status_code}"
            log.info("%s%s: %s, sending it again (try %d of %d)", self.base_url, path, why, attempt + 2,
                     self.retries + 1)
            await asyncio.sleep(self.retry_delay)
        raise AssertionError("unreachable")

    async def health(self, timeout: float = 5.0) -> bool:
        """True when GET /health answers 200 (the server is ready to generate)."""
        try:
            resp = await self._http.get(self.base_url + "/health", timeout=timeout)
        except httpx.HTTPError:
            return False
        return resp.status_code == 200
