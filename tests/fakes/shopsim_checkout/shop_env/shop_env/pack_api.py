"""Stand-in of upstream's shop_env/shop_env/pack_api.py as the project's launcher sees it: the
module globals it sets (env_max_num, MAX_RETRIES, RETRY_DELAY_SECONDS), initialize_environments()
and a Flask-like `app.run(host, port, threaded)`. It records what the launcher set (and the first
number `random` gives after seeding, standing in for upstream's price draws) in
$FAKE_PACK_API_RECORD, then serves the fake ShopSimulator (tests/fakes/fake_shopsim.py) there, its
prices drawn from that first number: the same launcher seed gives the same prices at every start,
as the launcher's seeding does for upstream."""

import json
import os
import random
import runpy
import sys

MAX_RETRIES = 5
RETRY_DELAY_SECONDS = 5
env_max_num = int(os.getenv("SHOPSIM_ENV_MAX_NUM", "20"))
_first_price_draw = None


def initialize_environments():
    global _first_price_draw
    _first_price_draw = random.random()


class _App:
    def run(self, host, port, threaded=True):
        with open(os.environ["FAKE_PACK_API_RECORD"], "w") as fh:
            json.dump({"env_max_num": env_max_num, "max_retries": MAX_RETRIES, "retry_delay": RETRY_DELAY_SECONDS,
                       "first_price_draw": _first_price_draw, "host": host, "port": port, "threaded": threaded,
                       "cwd": os.getcwd()}, fh)
        os.environ["SHOPSIM_ENV_MAX_NUM"] = str(env_max_num)
        fake = os.path.join(os.environ["FAKE_SHOPSIM_DIR"], "fake_shopsim.py")
        seed = str(int(_first_price_draw * 1e9))
        sys.argv = [fake, "--host", host, "--port", str(port), "--seed", seed, "--tasks", os.environ["FAKE_SHOPSIM_TASKS"]]
        sys.path.insert(0, os.environ["FAKE_SHOPSIM_DIR"])
        runpy.run_path(fake, run_name="__main__")


app = _App()
