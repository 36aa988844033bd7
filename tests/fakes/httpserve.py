"""The serving loop every HTTP stand-in shares: a threaded loopback server sized for hundreds of
concurrent clients, whose first stderr line carries its URL (tests start stand-ins with port 0
and read the bound port back from that line). Stdlib only."""

from __future__ import annotations

import sys
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def serve(host: str, port: int, handler: type[BaseHTTPRequestHandler], banner: Callable[[str], str]) -> int:
    """Serve until interrupted; `banner(url)` is the first stderr line. Returns the exit code."""
    ThreadingHTTPServer.request_queue_size = 1024  # hundreds of clients connect at once
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    sys.stderr.write(banner(f"http://{host}:{server.server_address[1]}") + "\n")
    sys.stderr.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0
