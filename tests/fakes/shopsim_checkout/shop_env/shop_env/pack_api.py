"""Stand-in of upstream's shop_env/shop_env/pack_api.py as the project's launcher sees it: the
module globals it sets (env_max_num, MAX_RETRIES, RETRY_DELAY_SECONDS), `gym` (the module pack_api
imports, pack_api.py:8), initialize_environments(), a Flask-like `app.run(host, port, threaded)`
and `app.wsgi_app` (the launcher wraps it in its fence and replaces `free_env_index` with its
LeasedSlots; the fake then serves with fake_shopsim's --instance-fence, which does what both do).

initialize_environments() builds the pool as upstream does (pack_api.py:132-141): one
`gym.make('WebAgentTextEnv-v0', ...)` per slot, each of which builds its own simulator and draws
that simulator's prices and price limits from the shared `random` in turn (engine.py:176-186
generate_product_prices, goal.py:70 get_existed_goals). Here each slot's env draws one number, its
prices' seed. app.run records what the launcher set (and every slot's draw) in
$FAKE_PACK_API_RECORD, then serves the fake ShopSimulator (tests/fakes/fake_shopsim.py) with one
price seed per slot (--slot-seeds): slots whose draws differ are different worlds, as upstream's.
"""

import json
import os
import random
import runpy
import sys

MAX_RETRIES = 5
RETRY_DELAY_SECONDS = 5
env_max_num = int(os.getenv("SHOPSIM_ENV_MAX_NUM", "20"))
envs = []
free_env_index = set()


class _SlotEnv:
    """What WebAgentTextEnv's construction leaves behind that matters here: its price draw."""

    def __init__(self, env_id, **kwargs):
        if env_id != "WebAgentTextEnv-v0":
            raise ValueError(f"unknown env {env_id}")
        self.price_draw = random.random()


class _Gym:
    """The `gym` module as pack_api uses it (gym.make only)."""

    @staticmethod
    def make(env_id, **kwargs):
        return _SlotEnv(env_id, **kwargs)


gym = _Gym()


def initialize_environments():
    global envs, free_env_index
    envs, free_env_index = [], set()
    for i in range(env_max_num):
        free_env_index.add(i)
        envs.append(gym.make("WebAgentTextEnv-v0", observation_mode="text", split="train", num_products=None))


def _unwrapped(environ, start_response):  # never called: the fake serves through fake_shopsim
    raise NotImplementedError


class _App:
    wsgi_app = staticmethod(_unwrapped)

    def run(self, host, port, threaded=True):
        fenced = self.wsgi_app is not _unwrapped
        leased = type(free_env_index) is not set  # the launcher's LeasedSlots, read as pack_api reads it
        draws = [env.price_draw for env in envs]
        with open(os.environ["FAKE_PACK_API_RECORD"], "w") as fh:
            json.dump({"env_max_num": env_max_num, "max_retries": MAX_RETRIES, "retry_delay": RETRY_DELAY_SECONDS,
                       "slot_draws": draws, "host": host, "port": port, "threaded": threaded,
                       "cwd": os.getcwd(), "fenced": fenced, "leased": leased}, fh)
        os.environ["SHOPSIM_ENV_MAX_NUM"] = str(env_max_num)
        fake = os.path.join(os.environ["FAKE_SHOPSIM_DIR"], "fake_shopsim.py")
        seeds = ",".join(str(int(d * 1e9)) for d in draws)
        sys.argv = [fake, "--host", host, "--port", str(port), "--slot-seeds", seeds,
                    "--tasks", os.environ["FAKE_SHOPSIM_TASKS"], *(["--instance-fence"] if fenced else [])]
        sys.path.insert(0, os.environ["FAKE_SHOPSIM_DIR"])
        runpy.run_path(fake, run_name="__main__")


app = _App()
