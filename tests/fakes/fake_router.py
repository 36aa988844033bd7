#!/usr/bin/env python3
"""Stand-in for slime's SGLang router (sglang_router) in front of one engine, with fault injection.

    python tests/fakes/fake_router.py --host 127.0.0.1 --port P --worker http://127.0.0.1:W \
        [--slow-share 0.1 --slow-s 30] [--seed 0]

What the rollout plugin and slime's rollout loop use of the router, and no more:
- POST /generate: forwarded to the worker as is (the answer comes back unchanged);
- GET /workers: {"workers": [{"url": <this router>}]} -- slime's abort() reads it, then POSTs
  /abort_request {"abort_all": true} to every worker; here the router is its own "worker";
- POST /abort_request: every /generate in flight answers at once with finish_reason "abort"
  (SGLang answers an aborted request with what it generated so far: here the first half of the
  output, with its log-probs);
- GET /health; GET /v1/loads in SGLang 0.5.15.post1's shape (sglang/srt/entrypoints/v1_loads.py:
  {"timestamp", "version", "loads": [{"dp_rank", "num_running_reqs", "num_waiting_reqs", ...}]}),
  which slime's abort polls until no request is left (slime server_control.py:43-63);
- the engine's memory calls slime makes after every rollout under --colocate (SGLangEngine
  .release_memory_occupation, slime sglang_engine.py:270-289,328-330): GET|POST /flush_cache answers
  400 while a request is in flight (SGLang http_server.py:862-877); POST /release_memory_occupation
  while a request is in flight is SGLang's scheduler assertion (weight_updater.py:184-187): the
  engine dies -- here the process answers 500 with the assertion text, then exits 1;
  POST /resume_memory_occupation. A /generate while released answers 500 (the fake's stand-in for
  an engine without its weights and KV cache);
- POST /update_weights_from_disk, forwarded to the engine: the stand-in slime's weight sync
  (tests/fakes/slime_stub/train.py).
A request whose client went away stays in flight until the worker answers or an abort ends it
(stricter than SGLang, which notices a disconnect within seconds).
Faults (fake only): a deterministic share (--slow-share, by hash of (seed, input_ids)) of
/generate calls waits --slow-s seconds before being forwarded: a policy that is too slow; with
--slow-after-abort every /generate that arrives after the first abort waits so (a request sent
after slime's end-of-step abort). An abort ends that wait too. --fail-first N: the first N
/generate calls answer 503 without reaching the engine (a router between engines, e.g. while one
restarts: what slime's own post retries, slime http_utils.py:165-198). GET /debug/counts: requests,
slowed, aborted, aborts, flushes, releases. Stdlib only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler

try:  # imported as tests' `fakes.<name>`, or run as a script from tests/fakes/
    from fakes import sglang_control
    from fakes.httpserve import serve
except ImportError:
    import sglang_control
    from httpserve import serve


class Router:
    def __init__(self, worker: str, slow_share: float, slow_s: float, seed: int, slow_after_abort: bool = False,
                 fail_first: int = 0):
        self.worker, self.slow_share, self.slow_s, self.seed = worker.rstrip("/"), slow_share, slow_s, seed
        self.slow_after_abort = slow_after_abort
        self.fail_left = fail_first
        self.cond = threading.Condition()
        self.generation = 0  # bumped by every abort
        self.inflight = 0
        self.released = False  # release_memory_occupation until resume_memory_occupation
        self.counts = {"requests": 0, "slowed": 0, "aborted": 0, "aborts": 0, "flushes": 0, "releases": 0,
                       "failed": 0}
        self.url = ""

    def _slow(self, input_ids, generation: int) -> bool:
        if self.slow_after_abort and generation > 0:
            return True
        h = hashlib.sha256(f"{self.seed}:{json.dumps(input_ids)}".encode()).digest()
        return int.from_bytes(h[:8], "big") / 2 ** 64 < self.slow_share

    def loads(self, query: str) -> tuple[int, bytes]:
        with self.cond:
            running = self.inflight
        return sglang_control.loads(query, running)

    def flush_cache(self) -> tuple[int, bytes]:
        with self.cond:
            busy = self.inflight
            self.counts["flushes"] += 1
        return sglang_control.flush_cache(busy)

    def release_memory(self) -> tuple[int, bytes]:
        """SGLang asserts the scheduler is idle; when it is not, the scheduler process dies and
        takes the server with it (the caller sees an error, then nothing)."""
        with self.cond:
            busy = self.inflight
            self.counts["releases"] += 1
            self.released = not busy
        if busy:
            sys.stderr.write(f"fake_router: AssertionError: release_memory_occupation should be called only "
                             f"when server is idle. ({busy} request(s) in flight)\n")
            sys.stderr.flush()
            threading.Timer(0.2, os._exit, args=(1,)).start()  # after the answer is on its way
            return 500, json.dumps({"error": {"message": "release_memory_occupation should be called only "
                                                         "when server is idle."}}).encode()
        return 200, b"{}"

    def resume_memory(self) -> tuple[int, bytes]:
        with self.cond:
            self.released = False
        return 200, b"{}"

    def abort(self) -> None:
        with self.cond:
            self.generation += 1
            self.counts["aborts"] += 1
            self.cond.notify_all()

    def generate(self, raw: bytes) -> tuple[int, bytes]:
        body = json.loads(raw or b"{}")
        with self.cond:
            if self.fail_left > 0:
                self.fail_left -= 1
                self.counts["failed"] += 1
                return 503, json.dumps({"error": {"message": "No available workers (fake --fail-first)"}}).encode()
            if self.released:
                return 500, json.dumps({"error": {"message": "the engine released its memory "
                                                             "(release_memory_occupation): no generate"}}).encode()
            start = self.generation
            self.inflight += 1
            self.counts["requests"] += 1
        try:
            if self._slow(body.get("input_ids"), start):
                with self.cond:
                    self.counts["slowed"] += 1
                    self.cond.wait_for(lambda: self.generation != start, timeout=self.slow_s)
                    if self.generation != start:
                        return 200, self._aborted(body, None)
            req = urllib.request.Request(self.worker + "/generate", data=raw, method="POST",
                                         headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=600) as resp:
                    code, out = resp.status, resp.read()
            except urllib.error.HTTPError as exc:
                code, out = exc.code, exc.read()
            with self.cond:
                aborted = self.generation != start
            if aborted and code == 200:
                return 200, self._aborted(body, json.loads(out))
            return code, out
        finally:
            with self.cond:
                self.inflight -= 1

    def to_worker(self, path: str, raw: bytes) -> tuple[int, bytes]:
        """A control call forwarded to the engine as is (its answer unchanged)."""
        req = urllib.request.Request(self.worker + path, data=raw, method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def _aborted(self, body: dict, answer: dict | None) -> bytes:
        with self.cond:
            self.counts["aborted"] += 1
        meta = dict((answer or {}).get("meta_info") or {})
        lps = list(meta.get("output_token_logprobs") or [])[: len((answer or {}).get("output_ids") or []) // 2]
        meta.update({"finish_reason": {"type": "abort", "message": "Abort before prefill" if answer is None
                                       else "Abort in waiting queue"},
                     "prompt_tokens": len(body.get("input_ids") or []), "completion_tokens": len(lps),
                     "output_token_logprobs": lps})
        return json.dumps({"text": "", "output_ids": [t[1] for t in lps], "meta_info": meta}).encode()


def make_handler(router: Router):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, code: int, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):  # noqa: N802
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path == "/generate":
                return self._send(*router.generate(raw))
            if self.path == "/abort_request":
                router.abort()
                return self._send(200, b"{}")
            if self.path == "/flush_cache":
                return self._send(*router.flush_cache())
            if self.path == "/release_memory_occupation":
                return self._send(*router.release_memory())
            if self.path == "/resume_memory_occupation":
                return self._send(*router.resume_memory())
            if self.path == "/update_weights_from_disk":
                return self._send(*router.to_worker(self.path, raw))
            self._send(404, b'{"detail": "Not Found"}')

        def do_GET(self):  # noqa: N802
            if self.path == "/health":
                return self._send(200, b"{}")
            if self.path == "/workers":
                return self._send(200, json.dumps({"workers": [{"url": router.url}]}).encode())
            if self.path.startswith("/v1/loads"):
                return self._send(*router.loads(self.path.partition("?")[2]))
            if self.path == "/flush_cache":
                return self._send(*router.flush_cache())
            if self.path == "/debug/counts":
                with router.cond:
                    return self._send(200, json.dumps(router.counts).encode())
            self._send(404, b'{"detail": "Not Found"}')

        def log_message(self, fmt, *args):
            pass

    return Handler


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--worker", required=True, help="the engine's base URL (fake_sglang)")
    ap.add_argument("--slow-share", type=float, default=0.0)
    ap.add_argument("--slow-s", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--slow-after-abort", action="store_true",
                    help="fake only: every /generate after the first abort waits --slow-s (or the next abort)")
    ap.add_argument("--fail-first", type=int, default=0, help="fake only: the first N /generate answer 503")
    args = ap.parse_args(argv)
    router = Router(args.worker, args.slow_share, args.slow_s, args.seed, args.slow_after_abort, args.fail_first)
    def banner(url: str) -> str:
        router.url = url
        return f"fake_router: {url} -> {args.worker}"

    return serve(args.host, args.port, make_handler(router), banner)


if __name__ == "__main__":
    sys.exit(main())
