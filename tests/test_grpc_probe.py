"""The two-node test's gRPC probe (support/netns.py _PROBE) reads a server's answer, not its load: a
raylet at a load of 15 answered GetNodeStats after the probe's 10 s deadline, and the listener test
read DEADLINE_EXCEEDED as "not a token-checked Ray gRPC server"."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from concurrent import futures

import grpc
import pytest
from support.netns import _PROBE

pytestmark = pytest.mark.heavy  # a gRPC server, and a probe that waits out one 10 s deadline


class _SlowRefuser(grpc.GenericRpcHandler):
    """Refuses every call as Ray's token check does; the first call only after the probe has given up
    on it (the server is busy until the caller's deadline has passed)."""

    def __init__(self):
        self.first = threading.Event()

    def service(self, details):
        def refuse(request, context):
            if not self.first.is_set():
                self.first.set()
                while context.is_active():  # busy until the caller's deadline has ended the call
                    time.sleep(0.05)
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "no token")
        return grpc.unary_unary_rpc_method_handler(refuse)


def test_a_server_that_misses_the_first_deadline_is_read_by_its_answer():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((_SlowRefuser(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        out = subprocess.run([sys.executable, "-c", _PROBE, "127.0.0.1", str(port),
                              "/ray.rpc.NodeManagerService/GetNodeStats"],
                             capture_output=True, text=True, timeout=3600)
    finally:
        server.stop(None)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "/ray.rpc.NodeManagerService/GetNodeStats UNAUTHENTICATED" in out.stdout.splitlines(), out.stdout
