"""A loopback stand-in for an OpenAI-compatible chat server (DashScope compatible-mode).

Speaks ``POST /v1/chat/completions`` (request: {"model", "messages", ...}; reply: a chat
completion {"id", "object", "choices": [{"message": {"role", "content"}, "finish_reason"}],
"usage"}) and errors as {"error": {"code", "message", "type"}}. Scriptable per test: each request
takes the next behaviour from `script` (a queue), then falls back to `default`. Behaviours:

    derive()                  proposals that are a pure function of the record ids in the prompt
    reply(text)               a fixed reply text (e.g. garbage, or a schema-invalid JSON)
    error(status, code=..., retry_after=...)   429 with Retry-After, 500, 401, 400 ...
    malformed()               HTTP 200 whose body is not JSON
    slow(seconds, then)       wait, then behave like `then` (a stop() cuts the wait short)
    held(gate, then)          wait until the file `gate` exists, then behave like `then` (likewise)
    drop()                    read the request, close the connection without a reply

Every request is recorded (path, headers, parsed body, monotonic arrival time), so tests can
check the Authorization header arrived, and that it never shows up anywhere else.
In a test:  ``with FakeOpenAI() as srv: srv.push(error(429, retry_after=1)); ... srv.base_url``.
Standalone (rehearsals): ``python tests/fakes/openai_server.py --port-file F [--expect-key-knob
DASHSCOPE_API_KEY]`` serves derive() on a free loopback port until TERM.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import re
import select
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

try:  # imported as tests' `fakes.<name>`, or run as a script from tests/fakes/
    from fakes.modelled_wait import wait
except ImportError:
    from modelled_wait import wait

RECORD_ID = re.compile(r"\br[0-9]+-s[0-9]+-g[0-9]+-i[0-9]+\b")
KINDS = ("search", "navigation", "inspection", "options", "price", "purchase", "other")


@dataclass(frozen=True)
class Behaviour:
    kind: str
    params: dict = field(default_factory=dict)


def derive() -> Behaviour:
    return Behaviour("derive")


def reply(text: str) -> Behaviour:
    return Behaviour("reply", {"text": text})


def error(status: int, code: str = "", message: str = "", retry_after: str | int | None = None) -> Behaviour:
    return Behaviour("error", {"status": status, "code": code, "message": message, "retry_after": retry_after})


def malformed() -> Behaviour:
    return Behaviour("malformed")


def slow(seconds: float, then: Behaviour | None = None) -> Behaviour:
    return Behaviour("slow", {"seconds": seconds, "then": then or derive()})


def held(gate: Path, then: Behaviour | None = None) -> Behaviour:
    return Behaviour("held", {"gate": Path(gate), "then": then or derive()})


def drop() -> Behaviour:
    return Behaviour("drop")


def record_ids_in(messages: list[dict]) -> list[str]:
    """Record ids named in the request's user messages, in order of first appearance."""
    seen: dict[str, None] = {}
    for m in messages:
        if m.get("role") == "user":
            for rid in RECORD_ID.findall(m.get("content", "")):
                seen.setdefault(rid, None)
    return list(seen)


def derived_proposals(messages: list[dict]) -> dict:
    """The deterministic reply of derive(): one proposal per record id found in the prompt."""
    props = []
    for rid in record_ids_in(messages):
        h = int(hashlib.sha256(rid.encode()).hexdigest()[:8], 16)
        props.append({"title": f"Lesson from {rid}", "trigger": f"When a task resembles record {rid}",
                      "instruction": f"Check every required option before buying (drawn from {rid}).",
                      "kind": KINDS[h % len(KINDS)], "polarity": "do" if h % 2 else "avoid",
                      "evidence": [rid]})
    return {"proposals": props[:16]}


@dataclass
class Request:
    path: str
    headers: dict
    body: dict | None
    t: float  # time.monotonic() at arrival


class FakeOpenAI:
    def __init__(self, default: Behaviour | None = None, expect_key: str | None = None):
        self.default = default or derive()
        self.expect_key = expect_key  # when set, other keys get 401 invalid_api_key
        self.script: collections.deque[Behaviour] = collections.deque()
        self.requests: list[Request] = []
        self.in_flight = self.max_in_flight = 0  # requests being answered now / at most at once
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None

    # -- control -----------------------------------------------------------------------------
    def push(self, *behaviours: Behaviour) -> FakeOpenAI:
        with self._lock:
            self.script.extend(behaviours)
        return self

    def _next(self) -> Behaviour:
        with self._lock:
            return self.script.popleft() if self.script else self.default

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, port: int = 0) -> FakeOpenAI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                fake._handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(0.05,), name="fake-openai",
                         daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def wait_for_requests(self, n: int, timeout: float = 300.0) -> bool:  # (a bound on a hang)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if len(self.requests) >= n:
                return True
            time.sleep(0.02)
        return False

    # -- serving -----------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        raw = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        with self._lock:
            self.requests.append(Request(h.path, dict(h.headers.items()), body, time.monotonic()))
        if h.path.rstrip("/") != "/v1/chat/completions":
            return self._send(h, 404, {"error": {"code": "not_found", "message": f"no route {h.path}"}})
        if self.expect_key is not None and h.headers.get("Authorization") != f"Bearer {self.expect_key}":
            return self._send(h, 401, {"error": {"code": "invalid_api_key", "message": "Incorrect API key provided.",
                                                 "type": "invalid_request_error"}})
        if body is None or not isinstance(body.get("messages"), list):
            return self._send(h, 400, {"error": {"code": "InvalidParameter", "message": "messages missing"}})
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            self._behave(h, self._next(), body)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _until_hung_up(self, h: BaseHTTPRequestHandler):
        """A slow answer's sleep, cut short (True) when the server stops or the client hangs up --
        the analyst's drain abandons its request at its deadline and exits -- so the wait a bench
        records (modelled_wait) is what the requester waited, not the rest of a dead request."""
        def sleep(seconds: float) -> bool:
            end = time.monotonic() + seconds
            while (left := end - time.monotonic()) > 0:
                if self._stopping.wait(min(0.02, left)) or _hung_up(h.connection):
                    return True
            return False
        return sleep

    def _behave(self, h, b: Behaviour, body: dict) -> None:
        p = b.params
        if b.kind == "slow":
            wait("FAKE_ANALYST_DELAY_S", p["seconds"], self._until_hung_up(h))  # a slow model's answer
            return self._behave(h, p["then"], body)
        if b.kind == "held":
            while not p["gate"].exists() and not self._stopping.wait(0.05):
                pass
            return self._behave(h, p["then"], body)
        if b.kind == "drop":
            h.close_connection = True
            try:
                h.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return None
        if b.kind == "malformed":
            return self._send_raw(h, 200, b'{"id": "chatcmpl-fake", "choices": [{"message": ')
        if b.kind == "error":
            payload = {"error": {"code": p["code"] or str(p["status"]), "message": p["message"] or "fake error",
                                 "type": "fake"}}
            extra = {"Retry-After": str(p["retry_after"])} if p["retry_after"] is not None else {}
            return self._send(h, p["status"], payload, extra)
        text = p["text"] if b.kind == "reply" else json.dumps(derived_proposals(body["messages"]))
        return self._send(h, 200, {
            "id": f"chatcmpl-fake-{len(self.requests)}", "object": "chat.completion", "created": 0,
            "model": body.get("model", ""),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}})

    def _send(self, h, status: int, obj: dict, headers: dict | None = None) -> None:
        self._send_raw(h, status, json.dumps(obj).encode(), headers)

    def _send_raw(self, h, status: int, data: bytes, headers: dict | None = None) -> None:
        try:
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(data)
        except OSError:  # the client went away (e.g. it was killed mid-request)
            pass


def _knob(name: str) -> str:
    """A knob's value as the toolkit resolves it: a rehearsal's key is in its .env, not in the
    environment of the shell that starts this stand-in (pyhelpers/launch/secret_env.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from pyhelpers.config.load import load

    return load().get(name)


def main() -> None:
    ap = argparse.ArgumentParser(description="Fake OpenAI-compatible chat server (derive() replies).")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", type=Path, help="write the bound port here")
    ap.add_argument("--expect-key-knob", default=None,
                    help="answer 401 unless the Bearer key equals this knob of the toolkit's configuration "
                         "(.env < environment, as the analyst reads it; DashScope knows its keys)")
    ap.add_argument("--exit-with", type=int, metavar="PID",
                    help="exit when this process ends (a rehearsal's driver: even a SIGKILLed one leaves none)")
    args = ap.parse_args()
    expect = _knob(args.expect_key_knob) if args.expect_key_knob else None
    # Test-only: FAKE_ANALYST_DELAY_S=<s> answers every request <s> s late (a slow model, so the
    # analyst's end-of-round drain outlasts the export, as a real DashScope drain can);
    # FAKE_ANALYST_HOLD_UNTIL=<file> answers none before <file> exists (a test holds the drain, and
    # so compile, at a point it must see, and lets it go on: the kill matrix's gate).
    delay = float(os.environ.get("FAKE_ANALYST_DELAY_S", "0") or 0)
    behaviour = slow(delay) if delay > 0 else derive()
    gate = os.environ.get("FAKE_ANALYST_HOLD_UNTIL")
    srv = FakeOpenAI(default=held(Path(gate), behaviour) if gate else behaviour, expect_key=expect).start(args.port)
    if args.port_file:
        args.port_file.write_text(f"{srv.port}\n")
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    watched = _started(args.exit_with) if args.exit_with else None
    while not done.wait(0.5):
        if watched and _started(args.exit_with) != watched:
            break
    srv.stop()


def _hung_up(conn: socket.socket) -> bool:
    """The client closed its end: readable with nothing to read (its request was read whole)."""
    try:
        return bool(select.select([conn], [], [], 0)[0]) and conn.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _started(pid: int) -> str | None:
    """The start time of pid (field 22 of /proc/<pid>/stat), None once it is gone: a reused pid differs."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


if __name__ == "__main__":
    main()
