"""HTTP servers in a thread on a free loopback port that answer every request with one fixed
answer: what a probe meets when another program holds SHOPSIM_PORT (404 for every path), or when
ShopSimulator's own Flask answers with an error before pack_api can (its HTML 400/415/500 page, or
Werkzeug 2.0.3's 200 "No JSON data provided" for a body it did not read as JSON).

    with other_http_server() as url:
        ...  # url = "http://127.0.0.1:<port>"
    with answering_server(500, page, "text/html; charset=utf-8") as url:
        ...
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _handler(status: int, body: bytes, content_type: str, headers: tuple[tuple[str, str], ...]):
    class _Fixed(BaseHTTPRequestHandler):
        def _answer(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer  # noqa: N815

        def log_message(self, *args):
            pass

    return _Fixed


@contextmanager
def answering_server(status: int, body: str, content_type: str,
                     headers: tuple[tuple[str, str], ...] = ()) -> Iterator[str]:
    """Every request gets `status` with `body` (and `headers`)."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _handler(status, body.encode(), content_type, headers))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


@contextmanager
def other_http_server() -> Iterator[str]:
    """Another program: 404 for every path."""
    with answering_server(404, "<h1>Not Found</h1>", "text/html") as url:
        yield url
