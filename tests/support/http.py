"""Small pieces of the tests' own loopback HTTP servers (a webhook receiver, a scripted Ray job API)."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler


def reply(handler: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
    """Answer one request with `body` and its length (clients that read to Content-Length)."""
    handler.send_response(status)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)
