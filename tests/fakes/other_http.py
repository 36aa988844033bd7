"""An HTTP server that is not ShopSimulator (404 for every path), in a thread on a free loopback
port: what a probe meets when another program holds SHOPSIM_PORT.

    with other_http_server() as url:
        ...  # url = "http://127.0.0.1:<port>"
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _NotFound(BaseHTTPRequestHandler):
    def _answer(self):
        body = b"<h1>Not Found</h1>"
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer  # noqa: N815

    def log_message(self, *args):
        pass


@contextmanager
def other_http_server() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
