"""Start the real ShopSimulator (pack_api.py) on our host, port, pool size and seed.

Upstream binds 0.0.0.0:5000, builds a pool of SHOPSIM_ENV_MAX_NUM (default 20) environments and
re-randomises prices at every start: each slot's environment builds its own simulator, which
draws its products' prices (engine.py generate_product_prices) and each goal's price limit
(goal.py get_existed_goals) from the shared `random`, slot after slot (pack_api.py:132-141). Seeded
once, slot k's prices would depend on k, and a task's price limit on the slot it lands in, i.e.
on timing. This launcher runs inside the `shopsim` conda env (Python 3.9, stdlib only here),
imports pack_api as a module, sets the pool size and reseeds `random` (and numpy when present)
with --seed right before EVERY slot's environment is built (around pack_api's `gym.make`): every
slot is the same world, the same at every start. It then serves the Flask app on the given
loopback address, behind a fence: every answer names this start (a random instance id), and a
request that names another start is refused before pack_api sees it. A slot number from before a
restart belongs to another episode after it; without the fence, that episode's env would take
the old episode's action (see fence()). The fence also hands out a lease with every slot a reset
pops (LeasedSlots) and refuses an interact or release whose lease pack_api no longer holds: a
slot pack_api freed itself (`over`) may be another episode's by the time the first one learns of
it -- never, when the answer saying `over` failed to serialise (pack_api.py:113, then :120).
Run as a script, by path:

    python launcher.py --shopsim-dir DIR --host 127.0.0.1 --port 5700 --slots 48 --seed 1
"""

import argparse
import importlib
import json
import os
import random
import sys
import threading
import uuid

# The same four as pyhelpers/shopsim/protocol.py (this file runs in the shopsim env, without pyhelpers).
INSTANCE_HEADER = "X-ShopSim-Instance"
STALE_SLOT_ERROR = "Environment slot belongs to an earlier ShopSimulator instance (it restarted)"
LEASE_HEADER = "X-ShopSim-Lease"
FREED_SLOT_ERROR = "Environment slot is no longer this episode's (ShopSimulator freed it since)"


def _environ_key(header):
    return "HTTP_" + header.upper().replace("-", "_")


class LeasedSlots(set):
    """pack_api's free set (`free_env_index`) with a lease per pop: the n-th pop of any slot is
    lease n of that slot, "SLOT:n". A slot is still held for the holder of lease "E:n" while E is
    not free and its latest pop is n: pack_api frees a slot only into this set (over, release_one,
    release_all) and hands it out only by pop (pack_api.py:98), so a slot freed since, or freed and
    popped again for another episode, fails the test."""

    def __init__(self, free):
        super().__init__(free)
        self._lock = threading.Lock()
        self._pops = 0
        self._latest = {}  # slot -> n of its latest pop
        self._request = threading.local()  # the lease this thread's request popped (one request per thread)

    def pop(self):
        with self._lock:
            idx = super().pop()
            self._pops += 1
            self._latest[idx] = self._pops
            self._request.lease = f"{idx}:{self._pops}"
        return idx

    def begin_request(self):
        self._request.lease = None

    def popped(self):
        """The lease of the slot this thread's current request popped, if it popped one."""
        return getattr(self._request, "lease", None)

    def holds(self, lease):
        """Whether pack_api still holds the slot of `lease` for the one it was handed to."""
        idx, _, n = (lease or "").partition(":")
        if not (idx.isdigit() and n.isdigit()):
            return False
        with self._lock:
            return int(idx) not in self and self._latest.get(int(idx)) == int(n)


def _refuse(start_response, instance, error):
    """pack_api's error shape (HTTP 200, result.error) for a request that never reaches it."""
    body = json.dumps({"result": {"error": error}}).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                              (INSTANCE_HEADER, instance)])
    return [body]


def fence(wsgi_app, instance, slots=None):
    """WSGI middleware around pack_api's app: answers carry INSTANCE_HEADER; a request carrying
    another instance gets pack_api's error shape and never reaches it. With `slots` (pack_api's
    free set as LeasedSlots): a reset's answer carries its slot's lease (LEASE_HEADER), and a
    request carrying a lease pack_api no longer holds is refused the same way (FREED_SLOT_ERROR)."""
    instance_key, lease_key = _environ_key(INSTANCE_HEADER), _environ_key(LEASE_HEADER)

    def app(environ, start_response):
        claimed = environ.get(instance_key)
        if claimed and claimed != instance:
            return _refuse(start_response, instance, STALE_SLOT_ERROR)
        if slots is not None:
            lease = environ.get(lease_key)
            if lease is not None and not slots.holds(lease):
                return _refuse(start_response, instance, FREED_SLOT_ERROR)
            slots.begin_request()

        def tagged(status, headers, exc_info=None):
            popped = slots.popped() if slots is not None else None
            extra = [(INSTANCE_HEADER, instance), *([(LEASE_HEADER, popped)] if popped else [])]
            return start_response(status, [*headers, *extra], exc_info)

        return wsgi_app(environ, tagged)

    return app


class _SeededGym:
    """pack_api's `gym` module, with make() reseeding first: one identical world per slot."""

    def __init__(self, gym, seed: int):
        self._gym, self._seed = gym, seed

    def __getattr__(self, name):
        return getattr(self._gym, name)

    def make(self, *args, **kwargs):
        _seed_all(self._seed)
        return self._gym.make(*args, **kwargs)


def _seed_all(seed: int) -> None:
    random.seed(seed)
    try:
        import numpy  # optional: numpy of ShopSimulator's env, seeded when present

        numpy.random.seed(seed)
    except ImportError:
        pass


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shopsim-dir", required=True, help="ShopSimulator checkout (holds shop_env/shop_env/)")
    # Given by the toolkit (launch/shopsim_server.py) from the resolved configuration: no
    # default of our own here, so env/defaults.env stays the one place a default is written.
    p.add_argument("--host", required=True, help="the address to bind (SHOPSIM_HOST)")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--slots", type=int, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--reset-retries", type=int, required=True, help="pack_api MAX_RETRIES (SHOPSIM_RESET_RETRIES)")
    p.add_argument("--reset-delay", type=float, required=True, help="pack_api RETRY_DELAY_SECONDS (SHOPSIM_RESET_DELAY)")
    args = p.parse_args(argv)

    app_dir = os.path.join(args.shopsim_dir, "shop_env", "shop_env")
    if not os.path.isfile(os.path.join(app_dir, "pack_api.py")):
        sys.exit(f"shopsim launcher: {app_dir}/pack_api.py not found (set SHOPSIM_DIR to the ShopSimulator checkout)")
    # pack_api appends "../" to sys.path and writes shop_agent.log relative to the cwd.
    os.chdir(app_dir)
    sys.path.insert(0, app_dir)
    os.environ["SHOPSIM_ENV_MAX_NUM"] = str(args.slots)  # the fork reads it at import
    _seed_all(args.seed)
    pack_api = importlib.import_module("pack_api")
    if not hasattr(getattr(pack_api, "gym", None), "make"):
        sys.exit(f"shopsim launcher: {app_dir}/pack_api.py does not build its environments with gym.make; "
                 "this launcher cannot give every slot the same prices (use the ShopSimulator fork the docs name, "
                 "or set SHOPSIM_LAUNCHER)")
    pack_api.gym = _SeededGym(pack_api.gym, args.seed)
    pack_api.env_max_num = args.slots  # upstream hard-codes the pool size in this global
    pack_api.MAX_RETRIES, pack_api.RETRY_DELAY_SECONDS = args.reset_retries, args.reset_delay
    pack_api.initialize_environments()
    # pack_api reads its free set by its global name at every request: the leased one from now on
    pack_api.free_env_index = slots = LeasedSlots(pack_api.free_env_index)
    pack_api.app.wsgi_app = fence(pack_api.app.wsgi_app, uuid.uuid4().hex, slots)
    print(f"shopsim launcher: {args.slots} environments ready; serving on {args.host}:{args.port}", flush=True)
    pack_api.app.run(host=args.host, port=args.port, threaded=True)


if __name__ == "__main__":
    main()
