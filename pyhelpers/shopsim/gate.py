"""ShopSimulator's gate: the run's one ShopSimulator, reachable from the other nodes with a token.

On a multi-node run slime's RolloutManager -- and so the rollout plugin -- may run on any node
(slime 624b824 slime/ray/placement_group.py:227-237 creates it with num_cpus=1 and no scheduling
strategy; Ray puts it wherever a CPU is free). ShopSimulator itself stays on 127.0.0.1 of the head:
pack_api's Flask app has no authentication. This gate listens on the head's NODE_ADDR, on the same
port number as the simulator (another address, so no clash), requires `Authorization: Bearer
<token>` (compared in constant time) and forwards what it accepts, unchanged, to the simulator
on loopback; anything else gets 401 and never reaches the simulator. The token is made per run
(pyhelpers/launch/gate_auth.py), passed by path -- to this process
on its command line, to the plugin in its YAML -- never by value. docs/multinode.md says why one
gated simulator rather than one per node.

Stdlib only; one thread per connection (an episode's reset may wait 90 s on the simulator's slot
pool), each with its own keep-alive connection to the simulator.

    python -m pyhelpers.shopsim.gate --listen 198.51.100.1:5700 --upstream 127.0.0.1:5700 --token-file F
"""

from __future__ import annotations

import argparse
import hmac
import http.client
import json
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
              "transfer-encoding", "upgrade", "authorization", "host", "content-length"}
UPSTREAM_TIMEOUT_S = 900.0  # beyond any of the client's own timeouts: the client decides when to give up


def read_token(path: str | Path) -> str:
    return Path(path).read_text().strip()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Gate

    def log_message(self, fmt, *args):  # one line per refusal only (below); never a header
        pass

    def _answer(self, status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        given = self.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, self.server.expected):
            sys.stderr.write(f"gate: refused {self.command} {self.path} from {self.client_address[0]} "
                             f"({'no' if not given else 'a wrong'} token)\n")
            self._answer(401, json.dumps({"error": "ShopSimulator's gate: the run's token is required"}).encode(),
                         [("Content-Type", "application/json"), ("WWW-Authenticate", "Bearer")])
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        for attempt in (0, 1):  # a kept-alive connection the simulator closed: once more on a new one
            conn = self._upstream(new=attempt == 1)
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                break
            except (ConnectionError, http.client.HTTPException, OSError) as exc:
                conn.close()
                sys.stderr.write(f"gate: {self.command} {self.path}: the simulator did not answer "
                                 f"({type(exc).__name__}: {exc}){'' if attempt else '; once more on a new connection'}\n")
                if attempt:
                    self._answer(502, json.dumps({"error": f"ShopSimulator's gate: the simulator on "
                                                           f"{self.server.upstream[0]}:{self.server.upstream[1]} "
                                                           f"did not answer ({exc})"}).encode(),
                                 [("Content-Type", "application/json")])
                    return
        self._answer(resp.status, data, [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP_BY_HOP])

    def _upstream(self, new: bool) -> http.client.HTTPConnection:
        local = self.server.local
        if new or getattr(local, "conn", None) is None:
            host, port = self.server.upstream
            local.conn = http.client.HTTPConnection(host, port, timeout=UPSTREAM_TIMEOUT_S)
        return local.conn

    do_GET = do_POST = _forward


class _Gate(ThreadingHTTPServer):
    daemon_threads = True
    # A step's episodes connect at once, each on its own keep-alive connection (up to SHOPSIM_SLOTS
    # and their retries). socketserver's default backlog of 5 overflowed on a busy head and the
    # plugin read an empty answer to a reset it had sent (an infra error that changes the step).
    # The simulator behind the gate (Werkzeug 2.1.2 serving.py:70, :659) listens with 128; the
    # kernel caps this at net.core.somaxconn.
    request_queue_size = 1024

    def __init__(self, listen: tuple[str, int], upstream: tuple[str, int], token: str):
        super().__init__(listen, _Handler)
        self.upstream, self.expected, self.local = upstream, f"Bearer {token}".encode(), threading.local()


def _addr(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pyhelpers.shopsim.gate", description=__doc__.split("\n")[0])
    ap.add_argument("--listen", required=True, help="NODE_ADDR:PORT (never 0.0.0.0)")
    ap.add_argument("--upstream", required=True, help="the simulator on loopback, 127.0.0.1:PORT")
    ap.add_argument("--token-file", required=True, help="the run's gate token (a path: the token never is an argument)")
    a = ap.parse_args(argv)
    listen, upstream = _addr(a.listen), _addr(a.upstream)
    if listen[0] in ("", "0.0.0.0", "::"):
        ap.error(f"--listen {a.listen}: the gate binds one address of this node, never every address")
    token = read_token(a.token_file)
    if len(token) < 32:
        ap.error(f"--token-file {a.token_file}: no token in it (the driver makes one per run)")
    gate = _Gate(listen, upstream, token)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=gate.shutdown, daemon=True).start())
    print(f"gate: {listen[0]}:{listen[1]} -> {upstream[0]}:{upstream[1]}, token required", flush=True)
    gate.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
