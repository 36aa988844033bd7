"""Keeps Ray's Prometheus metrics servers off the network on a multi-node run (docs/multinode.md §4).

On PYTHONPATH of the Ray node processes of a run with NNODES > 1 only (the head's `ray start`,
a worker's `make join`), with SHOPSIMRL_METRICS_HOST set. Ray starts three metrics HTTP servers
without authentication -- the agent's metrics export (RAY_PORT+7), the autoscaler's and the
dashboard's (RAY_PORT+8, +9) -- and binds them to every address whenever the node's address is not
loopback, with no setting for another address (ray 2.60.0 dashboard/modules/reporter/
reporter_agent.py:530-536 with _private/prometheus_exporter.py:326-329; autoscaler/v2/monitor.py:
127-132; dashboard/head.py:361-366). All three go through wsgiref.simple_server.make_server; this
module makes that call bind SHOPSIMRL_METRICS_HOST (127.0.0.1) when it is asked for every address
('' or 0.0.0.0 or ::). Nothing is imported until a process imports wsgiref.simple_server itself.
Stdlib only: it runs under the slime env's interpreter. A sitecustomize further down sys.path
(the env's own) is still run.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HOST = os.environ.get("SHOPSIMRL_METRICS_HOST", "")
_EVERY = ("", "0.0.0.0", "::")


def _patch(module):
    original = module.make_server

    def make_server(host, port, app, *args, **kwargs):
        return original(_HOST if host in _EVERY else host, port, app, *args, **kwargs)

    make_server.__wrapped__ = original
    module.make_server = make_server


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "wsgiref.simple_server":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module):
            run(module)
            _patch(module)

        loader.exec_module = exec_module
        return spec


def _chain():
    """Run the next sitecustomize on sys.path (the one this module shadows), if any."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


if _HOST:
    sys.meta_path.insert(0, _Finder())


_chain()
