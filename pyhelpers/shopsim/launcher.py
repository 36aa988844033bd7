"""Start the real ShopSimulator (pack_api.py) on our host, port, pool size and seed.

Upstream binds 0.0.0.0:5000, builds a pool of SHOPSIM_ENV_MAX_NUM (default 20) environments and
re-randomises prices at every start. This launcher runs inside the `shopsim` conda env (Python
3.9, stdlib only here), imports pack_api as a module, then — before any environment is built —
sets the pool size, seeds `random` (and numpy when present) so prices are the same at every
start, and serves the Flask app on the given loopback address. Run as a script, by path:

    python launcher.py --shopsim-dir DIR --host 127.0.0.1 --port 5700 --slots 48 --seed 1
"""

import argparse
import importlib
import os
import random
import sys


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shopsim-dir", required=True, help="ShopSimulator checkout (holds shop_env/shop_env/)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--slots", type=int, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--reset-retries", type=int, default=int(os.environ.get("SHOPSIM_RESET_RETRIES", "5")), help="pack_api MAX_RETRIES (SHOPSIM_RESET_RETRIES)")
    p.add_argument("--reset-delay", type=float, default=float(os.environ.get("SHOPSIM_RESET_DELAY", "5")), help="pack_api RETRY_DELAY_SECONDS (SHOPSIM_RESET_DELAY)")
    args = p.parse_args(argv)

    app_dir = os.path.join(args.shopsim_dir, "shop_env", "shop_env")
    if not os.path.isfile(os.path.join(app_dir, "pack_api.py")):
        sys.exit(f"shopsim launcher: {app_dir}/pack_api.py not found (set SHOPSIM_DIR to the ShopSimulator checkout)")
    # pack_api appends "../" to sys.path and writes shop_agent.log relative to the cwd.
    os.chdir(app_dir)
    sys.path.insert(0, app_dir)
    os.environ["SHOPSIM_ENV_MAX_NUM"] = str(args.slots)  # the fork reads it at import
    random.seed(args.seed)
    try:
        import numpy

        numpy.random.seed(args.seed)
    except ImportError:
        pass
    pack_api = importlib.import_module("pack_api")
    pack_api.env_max_num = args.slots  # upstream hard-codes the pool size in this global
    pack_api.MAX_RETRIES, pack_api.RETRY_DELAY_SECONDS = args.reset_retries, args.reset_delay
    pack_api.initialize_environments()
    print(f"shopsim launcher: {args.slots} environments ready; serving on {args.host}:{args.port}", flush=True)
    pack_api.app.run(host=args.host, port=args.port, threaded=True)


if __name__ == "__main__":
    main()
