"""The end-of-step idle check (pyhelpers/rollout/engines.py) reads /v1/loads as slime does, and an
answer it cannot read is never taken for an idle engine (issue 27 item 12)."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pyhelpers.rollout import engines


@pytest.mark.parametrize("answer, held", [
    ({"loads": [{"num_running_reqs": 2, "num_waiting_reqs": 1}]}, 3),   # SGLang 0.5.15
    ({"num_reqs": 4}, 4),
    ({"num_total_reqs": 5}, 5),                                         # slime's other names
    ({"total_reqs": 6}, 6),
    ({"total_running_reqs": 1, "total_waiting_reqs": 2}, 3),
    ([{"num_reqs": 1}, {"total_reqs": 2}], 3),
    ({"loads": [{"num_running_reqs": 0, "num_waiting_reqs": 0}]}, 0),
])
def test_every_key_name_slime_reads_is_counted(answer, held):
    assert engines.requests_in(answer) == held


@pytest.mark.parametrize("answer", [
    {}, {"status": "ok"}, {"loads": [{"queue": 3}]}, {"loads": []}, [], "busy", None,
    [{"num_reqs": 0}, {"pending": 7}],
])
def test_an_unknown_shape_is_not_idle(answer):
    assert engines.requests_in(answer) is None


class _Engine(BaseHTTPRequestHandler):
    loads: object = None

    def _json(self, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802
        self._json({"workers": []} if self.path == "/workers" else type(self).loads)

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._json({})

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("loads, idle", [({"total_reqs": 0}, True), ({"pending": 0}, False)])
def test_abort_until_idle_trusts_only_a_known_answer(loads, idle):
    handler = type("Engine", (_Engine,), {"loads": loads})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}"
        assert asyncio.run(engines.abort_until_idle(url, timeout=0.3)) is idle
    finally:
        srv.shutdown()
        srv.server_close()


def test_generate_docstring_says_removed_episodes_count_nowhere():
    """docs/training.md "Removed episodes": groups.normalized_rewards leaves them out of the group's
    mean and std; the module that marks them must not say the opposite."""
    from pyhelpers.rollout import generate

    doc = " ".join(generate.__doc__.split())
    assert "still count in the group's reward mean/std" not in doc
    assert "normalized_rewards" in doc
