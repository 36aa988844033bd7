"""ShopSimulator's pack_api protocol without a transport: payloads, results, errors.

pack_api (`shop_env/shop_env/pack_api.py`) has one endpoint, POST /api/shop_agent, whose JSON
answer is always `{"result": {...}}` with HTTP 200, errors included (`result.error` is a string).
This module builds the request bodies and turns an answer into a typed result or a typed error
(how the server reads an action out of the model's text: shopsim/actions.py). Scores come from
`reward_detail` (goal.get_reward): loose = the env reward, strict = r_type·r_att·r_option·r_price,
success = all four equal 1. Stdlib only: the rollout plugin imports this inside slime's env.
See docs/shopsim_protocol.md for the sources.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

API_PATH = "/api/shop_agent"
# Exact strings pack_api answers (fork funnamer/shopSimulator @1487f67).
NO_SLOT_ERROR = "Unable to get available environment resource, please try again later"
PROBE_ERROR = "No valid environment index provided"
# pack_api.py:61-64: `request.json` was None -- JSON null, or (Werkzeug before 2.1: 2.0.3's
# wrappers/request.py:580-581) a body sent without a JSON Content-Type.
NO_JSON_ERROR = "No JSON data provided"
# str(IndexError) of SimServer.receive's `self.goals[idx]` (web_agent_text_env.py) when reset's idx
# is beyond the server's goal list; raised AFTER pack_api.py:98 popped a slot, which stays taken.
BAD_INDEX_ERROR = "list index out of range"
INSTRUCTION_PREFIX = "Instruction:"  # search_page.html:18 `<h4>Instruction: <br>{{ instruction_text }}</h4>`
# Our launcher's fence (pyhelpers/shopsim/launcher.py, which runs without pyhelpers and repeats
# these four): every answer names the simulator instance; a request naming another instance is
# refused before pack_api sees it (a slot number from before a restart is another episode's now).
INSTANCE_HEADER = "X-ShopSim-Instance"
STALE_SLOT_ERROR = "Environment slot belongs to an earlier ShopSimulator instance (it restarted)"
# ... and a reset's answer carries its slot's lease; a request carrying a lease pack_api no longer
# holds (it freed the slot since: `over`, maybe handed it to another episode) is refused the same way.
LEASE_HEADER = "X-ShopSim-Lease"
FREED_SLOT_ERROR = "Environment slot is no longer this episode's (ShopSimulator freed it since)"
REWARD_KINDS = ("strict", "loose", "success")


# ----------------------------------------------------------------------------- errors

class ShopSimError(Exception):
    """ShopSimulator could not do what was asked (an infrastructure error, never a policy failure).

    `server_message` is the server's `result.error` text when there was one."""

    def __init__(self, message: str, *, action: str = "", server_message: str | None = None):
        self.action, self.server_message, self.detail = action, server_message, message
        super().__init__(f"{action}: {message}" if action else message)


class NoSlotError(ShopSimError):
    """reset found no free environment slot after the server's own retries (pool exhausted)."""


class BadTaskIndex(ShopSimError):
    """reset's task index is beyond the server's task list. pack_api popped a slot before it
    failed (pack_api.py:98, :116-118) and never frees it: the caller owns an unknown slot."""


class ProbeOK(ShopSimError):
    """The answer to the no-slot readiness probe (release_one without env_idx): the server is up."""


class ProtocolError(ShopSimError):
    """The answer is not what pack_api sends (not JSON, no `result`, wrong field types)."""


class UnusableServer(ProtocolError):
    """A server answered the readiness probe, and waiting will not change its answer: the probe's
    callers stop at once instead of waiting SHOPSIM_START_TIMEOUT. `fix` says what to change."""

    def __init__(self, message: str, *, fix: str, action: str = "", server_message: str | None = None):
        self.fix = fix
        super().__init__(message, action=action, server_message=server_message)


class NotShopSim(UnusableServer):
    """Another program answers at this address: a status pack_api's Flask never gives, or an
    answer without pack_api's `result`."""


class ShopSimRefused(UnusableServer):
    """ShopSimulator itself answered the probe with an error: its Flask's HTML 400/415/500 page, or
    pack_api's own `result.error` (e.g. "No JSON data provided")."""


class SlotNotHeld(ShopSimError):
    """The fence refused the request unseen: the slot is not this episode's any more. Never
    release it (someone else may hold that number now)."""


class StaleSlotError(SlotNotHeld):
    """The simulator restarted since this slot was taken."""


class FreedSlotError(SlotNotHeld):
    """The simulator freed this slot since it was taken (an `over` whose answer never arrived),
    and may have handed it to another episode."""


class TransportError(ShopSimError):
    """The request did not get an answer: connection refused/reset, timeout, HTTP status != 200."""


class HTTPStatusError(TransportError):
    """An HTTP answer with a status other than 200 (pack_api always answers 200). `from_shopsim`:
    the answer is ShopSimulator's own (see is_shopsim_answer)."""

    def __init__(self, message: str, *, status: int, action: str = "", from_shopsim: bool = False):
        self.status, self.from_shopsim = status, from_shopsim
        super().__init__(message, action=action)


# What to do when ShopSimulator itself answers with an error (the probe's ShopSimRefused).
REQUEST_CHANGED_FIX = ("ShopSimulator is up but did not get this client's JSON body as sent: look at what stands "
                       "between them (the server SHOPSIM_LAUNCHER starts, a proxy in front of SHOPSIM_PORT)")
SERVER_FAILED_FIX = ("ShopSimulator is up but fails on this request: remove the cause its traceback shows (the run's "
                     "logs/shopsim.log), then restart it")


def is_flask_error_page(status: int, content_type: str, text: str) -> bool:
    """Werkzeug's HTML error page (`<title>{code} {name}</title>` in 2.0.3 and 2.1.2 alike,
    exceptions.py get_body) for a status pack_api's Flask gives before or around pack_api: 400 and
    415 (a body it did not read as JSON), 500 (pack_api raised outside its try)."""
    return status in (400, 415, 500) and "text/html" in (content_type or "") and f"<title>{status} " in text


def is_shopsim_answer(status: int, content_type: str, text: str, instance: str | None) -> bool:
    """Whether a non-200 answer is ShopSimulator's own: our launcher's fence names its instance in
    every answer (INSTANCE_HEADER), Flask's error pages included; without the fence, Flask's page
    for a status pack_api's Flask gives is taken as the simulator's."""
    return bool(instance) or is_flask_error_page(status, content_type, text)


def refused_fix(status: int, server_message: str | None = None) -> str:
    """The fix for ShopSimulator answering the probe with an error: HTTP `status`, or (200)
    pack_api's own `result.error` server_message."""
    if status in (400, 415) or server_message == NO_JSON_ERROR:
        return REQUEST_CHANGED_FIX
    return SERVER_FAILED_FIX


def http_status_message(status: int, content_type: str, text: str, url: str) -> str:
    """What an answer other than HTTP 200 means. pack_api answers everything itself with 200 except
    what Flask answers before or around it (Flask's HTML error pages): 400 (Werkzeug 2.1-2.2) or 415
    (2.3 and later) when the body's Content-Type is not JSON, 400 when it does not parse, and 500 when
    pack_api raised outside its try -- a JSON body that is not an object fails at pack_api.py:66
    (`data.get`), an answer that does not serialise at :120 (`jsonify`)."""
    if status == 401:
        return (f"HTTP 401 from {url}: ShopSimulator's gate refused this client's token (a multi-node run's "
                "simulator answers other nodes only with the run's token, runs/<RUN>/shopsim-gate/token); the "
                "plugin reads it from the path in its slime.yaml: is the run directory shared with this node?")
    if "text/html" in (content_type or ""):
        if status in (400, 415):
            return (f"HTTP {status} from {url}: ShopSimulator's Flask did not read the request body as JSON "
                    f"(Werkzeug answers {status} for a Content-Type other than application/json"
                    f"{' or a body that does not parse' if status == 400 else ''}); this client sends a JSON "
                    "object with that type, so something between it and pack_api changed the request (a proxy, or "
                    "the server SHOPSIM_LAUNCHER starts)")
        if status == 500:
            return (f"HTTP 500 from {url}: ShopSimulator raised outside its own error handling -- pack_api does so "
                    "for a body of JSON that is not an object (pack_api.py:66, `data.get`) and for an answer that "
                    "does not serialise (:120, after an `over` has freed the slot at :113); its traceback is in the "
                    "run's logs/shopsim.log (or shop_agent.log in SHOPSIM_DIR/shop_env/shop_env)")
    return f"HTTP {status} from {url}: {text[:200]}"


# ----------------------------------------------------------------------------- payloads

def _env_index(env_idx: Any) -> int:
    # pack_api accepts only a JSON integer (isinstance(env_idx, int)); bool would sneak through.
    if isinstance(env_idx, bool) or not isinstance(env_idx, int) or env_idx < 0:
        raise ValueError(f"env_idx must be a non-negative int, got {env_idx!r}")
    return env_idx


def reset_timeout_s(retries: int, delay_s: float) -> float:
    """How long a client waits for one reset: pack_api itself waits up to retries x delay for a free
    slot (SHOPSIM_RESET_RETRIES/DELAY) before it answers, plus a margin for the reset."""
    return retries * delay_s + 30.0


def reset_payload(task_idx: int) -> dict:
    """Start task `task_idx` in a free slot. No env_idx: the server pops a slot (the only safe way)."""
    if isinstance(task_idx, bool) or not isinstance(task_idx, int) or task_idx < 0:
        raise ValueError(f"task_idx must be a non-negative int, got {task_idx!r}")
    return {"action": "reset", "idx": task_idx}


def interact_payload(env_idx: int, response: str) -> dict:
    if not isinstance(response, str):
        raise ValueError("response must be a string")
    return {"action": "interact", "env_idx": _env_index(env_idx), "response": response}


def release_one_payload(env_idx: int) -> dict:
    return {"action": "release_one", "env_idx": _env_index(env_idx)}


def release_all_payload() -> dict:
    return {"action": "release_all"}


def probe_payload() -> dict:
    """release_one without env_idx: consumes nothing and answers PROBE_ERROR when the server is up.
    Never probe with reset or interact: a request without env_idx pops a slot."""
    return {"action": "release_one"}


# ----------------------------------------------------------------------------- results

@dataclass(frozen=True)
class Scores:
    """Scores of one finished episode, from reward and reward_detail."""

    loose: float
    strict: float
    success: bool
    r_type: float = 0.0
    r_att: float = 0.0
    r_option: float = 0.0
    r_price: float = 0.0

    def value(self, kind: str) -> float:
        """The training/eval score named by REWARD: strict | loose | success."""
        if kind == "strict":
            return self.strict
        if kind == "loose":
            return self.loose
        if kind == "success":
            return 1.0 if self.success else 0.0
        raise ValueError(f"reward kind must be one of {REWARD_KINDS}, got {kind!r}")


ZERO_SCORES = Scores(loose=0.0, strict=0.0, success=False)


def _num(value: Any, name: str) -> float:
    # r_price arrives as a JSON boolean (price <= price_upper); the others as numbers.
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    raise ProtocolError(f"reward_detail.{name} is not a number: {value!r}", action="interact")


def parse_scores(reward: Any, reward_detail: dict | None) -> Scores:
    """Loose = env reward; strict = r_type·r_att·r_option·r_price; success = all four == 1.
    An empty reward_detail (episode not finished by a purchase) gives ZERO_SCORES."""
    if not reward_detail:
        return ZERO_SCORES
    parts = {k: _num(reward_detail.get(k, 0.0), k) for k in ("r_type", "r_att", "r_option", "r_price")}
    strict = parts["r_type"] * parts["r_att"] * parts["r_option"] * parts["r_price"]
    return Scores(loose=_num(reward if reward is not None else 0.0, "reward"), strict=strict,
                  success=all(v == 1.0 for v in parts.values()), **parts)


@dataclass(frozen=True)
class ResetResult:
    env_idx: int
    idx: int
    instruction: str
    instruction_simple: str = ""
    goal_options: Any = None
    message: str = ""
    user_persona: dict | None = None
    reason_key: Any = None
    raw: dict = field(default_factory=dict, repr=False)
    instance: str | None = None  # the INSTANCE_HEADER of the answer (None: no fence in front)
    lease: str | None = None  # the LEASE_HEADER of the answer: the fence's name for this hold of the slot


@dataclass(frozen=True)
class StepResult:
    """One interact answer. `observation` is pack_api's `instruction` field: the new page text
    followed by the lines "搜索功能是否可用: …" and "可点击的按钮: [...]"."""

    env_idx: int
    done: bool
    over: bool
    reward: float
    observation: str
    scores: Scores
    reward_detail: dict = field(default_factory=dict)
    purchase: dict = field(default_factory=dict)
    goal: dict = field(default_factory=dict)
    message: str = ""
    raw: dict = field(default_factory=dict, repr=False)


def result_of(body: Any, action: str) -> dict:
    """The `result` object of an answer, or the typed error it carries."""
    if not isinstance(body, dict) or not isinstance(body.get("result"), dict):
        raise ProtocolError(f"answer has no 'result' object: {str(body)[:200]}", action=action)
    result = body["result"]
    if "error" in result:
        err = str(result["error"])
        if err == NO_SLOT_ERROR:
            raise NoSlotError("no free environment slot", action=action, server_message=err)
        if err == PROBE_ERROR:
            raise ProbeOK("server answered the no-slot probe", action=action, server_message=err)
        if err == BAD_INDEX_ERROR and action == "reset":
            raise BadTaskIndex(f"server error: {err} (no such task index; a slot was taken)", action=action,
                               server_message=err)
        if err == NO_JSON_ERROR:
            raise ProtocolError(f"server error: {err} -- pack_api got no JSON object: the body was JSON null, or "
                                "it came without `Content-Type: application/json` (Werkzeug before 2.1 reads such a "
                                "body as nothing); this client sends both right, so something between it and "
                                "pack_api changed the request", action=action, server_message=err)
        if err == STALE_SLOT_ERROR:
            raise StaleSlotError("the simulator restarted since this slot was taken", action=action,
                                 server_message=err)
        if err == FREED_SLOT_ERROR:
            raise FreedSlotError("the simulator freed this slot since it was taken", action=action,
                                 server_message=err)
        raise ShopSimError(f"server error: {err}", action=action, server_message=err)
    return result


def _field(result: dict, name: str, kind: type | tuple, action: str) -> Any:
    value = result.get(name)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise ProtocolError(f"result.{name} missing or not {kind}: {value!r}", action=action)
    return value


def parse_reset(body: Any) -> ResetResult:
    r = result_of(body, "reset")
    return ResetResult(env_idx=_field(r, "env_idx", kind=int, action="reset"), idx=_field(r, "idx", kind=int, action="reset"),
                       instruction=_field(r, "instruction", kind=str, action="reset"),
                       instruction_simple=r.get("instruction_simple") or "",
                       goal_options=r.get("goal_options"), message=r.get("message", ""),
                       user_persona=r.get("user_persona"), reason_key=r.get("reason_key"), raw=r)


def goal_instruction(reset_instruction: str) -> str:
    """The goal's text in a reset answer: pack_api returns the index page's heading, "Instruction: "
    followed by the goal's instruction (shop_agent.py:38, search_page.html:18)."""
    text = reset_instruction.strip()
    if text.startswith(INSTRUCTION_PREFIX):
        text = text[len(INSTRUCTION_PREFIX):].strip()
    return text


def parse_interact(body: Any) -> StepResult:
    r = result_of(body, "interact")
    done = bool(_field(r, "done", kind=bool, action="interact"))
    detail = r.get("reward_detail") or {}
    reward = _num(r.get("reward", 0.0) or 0.0, "reward")
    return StepResult(env_idx=_field(r, "env_idx", kind=int, action="interact"), done=done, over=bool(r.get("over")),
                      reward=reward, observation=_field(r, "instruction", kind=str, action="interact"),
                      scores=parse_scores(reward, detail) if done else ZERO_SCORES, reward_detail=detail,
                      purchase=r.get("purchase") or {}, goal=r.get("goal") or {},
                      message=r.get("message", ""), raw=r)


def parse_message(body: Any, action: str) -> str:
    """release_one / release_all answers: the `message` text."""
    return str(result_of(body, action).get("message", ""))


def parse_probe(body: Any) -> bool:
    """True when the body is the server's answer to probe_payload() (the server is up)."""
    try:
        result_of(body, "probe")
    except ProbeOK:
        return True
    except ShopSimError:
        return False
    return False
