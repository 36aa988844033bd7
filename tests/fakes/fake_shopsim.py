#!/usr/bin/env python3
"""Stand-in for ShopSimulator's pack_api (shop_env/shop_env/pack_api.py), for tests.

    SHOPSIM_ENV_MAX_NUM=48 python tests/fakes/fake_shopsim.py --host 127.0.0.1 --port P \
        --seed S --tasks CATALOG.json

It speaks pack_api's protocol as read from funnamer/shopSimulator @1487f67 (docs/shopsim_protocol.md):
one endpoint POST /api/shop_agent, answers always {"result": {...}} with HTTP 200, errors as
result.error; a pool of SHOPSIM_ENV_MAX_NUM slots (default 20), popped by a request without
env_idx with SHOPSIM_RESET_RETRIES x SHOPSIM_RESET_DELAY s of waiting (default 5 x 5 s), freed when
an answer says `over` (purchase, or more than 42 history messages) or by release_one / release_all;
release_one without a valid env_idx answers "No valid environment index provided" (the probe).
The action is the text after the first "\\nAction: "; `search[...]` works from any page, `click[...]`
only on a button of the current page; anything else is a silent no-op.

--tasks is a product catalog in ShopSimulator's own format (the records of
fine_items_*.json[l][.gz]: asin, title, category, query, pricing, customization_options,
attribute, instructions[...], user_persona, ...). Goals are enumerated as upstream does (skip bad
or duplicate asins; one goal per instruction; skip records whose first instruction has no
attributes), so task index i here is task index i there. Each slot is its own world, as upstream
builds one simulator per slot (pack_api.py:132-141): its prices and price limits come from its
seed in --slot-seeds (the project's launcher passes what each slot drew from the shared RNG:
tests/fakes/shopsim_checkout), or from --seed for every slot (ShopSimulator as the project's
launcher starts it: every slot's world identical). Rewards follow goal.get_reward with simple
string matching in place of spaCy/thefuzz. A reset pops its slot first and a failing one keeps it
taken (pack_api.py:98, :109, :116-118); its `instruction` is "Instruction: " + the goal's text.

--instance-fence stands in for the fence our launcher puts in front of pack_api
(pyhelpers/shopsim/launcher.py fence() and LeasedSlots, tested on their own): every answer carries
X-ShopSim-Instance (random per start), and a request naming another instance is refused with its
error before the pool sees it; an answer whose request popped a slot carries X-ShopSim-Lease
("SLOT:n", the n-th pop), and a request carrying a lease of a slot freed since (or freed and popped
again) is refused the same way. tests/fakes/procs.py starts the fake with it (a simulator as the
toolkit serves it).

Test-only extensions (not in pack_api): GET /debug/slots (pool and request counters, and how many
requests wait for a free slot now),
--inject-error-rate R (a deterministic share of interacts answers result.error, state unchanged),
--fail-reset-once IDX,... (the first reset of each listed task fails after the pop, as an
exception inside env.reset would), --fail-over-once IDX,... (the first interact of each listed task
that ends its episode frees the slot, then answers Flask's 500 page: an answer that does not
serialise, pack_api.py:112-113 then :120).
Stdlib only.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import os
import random
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler

try:  # imported as tests' `fakes.<name>`, or run as a script from tests/fakes/
    from fakes.httpserve import serve
except ImportError:
    from httpserve import serve

NO_SLOT = "Unable to get available environment resource, please try again later"
NO_INDEX = "No valid environment index provided"
INSTANCE_HEADER = "X-ShopSim-Instance"  # the launcher's fence (--instance-fence)
STALE_SLOT_ERROR = "Environment slot belongs to an earlier ShopSimulator instance (it restarted)"
LEASE_HEADER = "X-ShopSim-Lease"  # the fence's lease of a popped slot (--instance-fence)
FREED_SLOT_ERROR = "Environment slot is no longer this episode's (ShopSimulator freed it since)"
SUB_PAGES = ("description", "features", "reviews", "attributes")
PAGE_SIZE, SEARCH_N = 20, 150


def read_records(path: str) -> list[dict]:
    raw = (gzip.open if path.endswith(".gz") else open)(path, "rb").read().decode("utf-8")
    text = raw.lstrip()
    if text.startswith("["):
        return json.loads(text)
    return [json.loads(line) for line in raw.splitlines() if line.strip()]


def price_range_above(price: float) -> list[float]:
    count = 3 if price <= 100 else 10 if price <= 1000 else 50 if price <= 5000 else 100 if price <= 10000 else 4
    base = math.ceil(price / 10) * 10
    return [base + i * 10 for i in range(count)]


class Catalog:
    """Products and goals, enumerated in upstream's order, with seeded prices."""

    def __init__(self, records: list[dict], seed: int):
        rng = random.Random(seed)
        seen: set[str] = set()
        self.products: list[dict] = []
        for rec in records:
            asin = str(rec.get("asin", ""))
            if asin == "nan" or len(asin) > 20 or asin in seen:
                continue
            seen.add(asin)
            opts = {}
            for name, contents in (rec.get("customization_options") or {}).items():
                if contents:
                    opts[name.lower()] = [c["value"].strip().replace("/", " | ").lower() for c in contents]
            pricing = rec.get("pricing") or [100.0]
            price = pricing[0] if len(pricing) == 1 else rng.uniform(*pricing[:2])
            self.products.append({**rec, "asin": asin, "options": opts, "price": price,
                                  "query": str(rec.get("query", "")).lower().strip()})
        self.by_asin = {p["asin"]: p for p in self.products}
        self.goals: list[dict] = []
        for prod in self.products:
            instructions = prod.get("instructions") or []
            attrs = instructions[0].get("attributes", []) if instructions else []
            for ins in instructions:
                if not attrs:
                    continue
                prices = price_range_above(prod["price"])
                upper = sorted(rng.sample(prices, 2))[1] if len(prices) >= 2 else 10000000
                self.goals.append({
                    "asin": prod["asin"], "category": prod.get("category", ""), "query": prod["query"],
                    "name": prod.get("title", ""), "instruction_text": ins["instruction"],
                    "instruction_simple": ins.get("instruction_simple", ""), "attributes": attrs,
                    "price_upper": upper, "goal_options": ins.get("instruction_options", []),
                    "user_persona": prod.get("user_persona") or {}, "reason_key": prod.get("reason_key"),
                    "weight": 1})

    def search(self, keywords: str) -> list[dict]:
        grams = {keywords[i:i + 2] for i in range(len(keywords) - 1)} | set(keywords.split())
        scored = []
        for n, prod in enumerate(self.products):
            hay = " ".join([prod.get("title", ""), prod.get("category", ""), prod["query"],
                            " ".join(prod.get("attribute") or [])]).lower()
            score = sum(1 for g in grams if g.strip() and g in hay)
            if score:
                scored.append((-score, n, prod))
        return [p for _, _, p in sorted(scored, key=lambda t: (t[0], t[1]))][:SEARCH_N]


def reward(prod: dict, goal: dict, options: dict) -> tuple[float, dict]:
    """goal.get_reward with string matching instead of spaCy/thefuzz."""
    cats = lambda c: {x.strip() for x in str(c).split("›")}  # noqa: E731
    query_match = prod["query"] == goal["query"]
    category_match = len(cats(prod.get("category", "")) & cats(goal["category"])) >= 2
    want = set(goal["name"].lower().split())
    title_score = len(want & set(prod.get("title", "").lower().split())) / len(want) if want else 0.2
    r_type = 1.0 if (query_match or category_match or title_score > 0.2) else 0.5
    text = " ".join([prod.get("title", ""), str(prod.get("small_description", "")),
                     str(prod.get("full_description", ""))]).lower()
    have = {a.lower() for a in prod.get("attribute") or []}
    attr_hits = sum(1 for a in goal["attributes"] if a.lower() in have or a.lower() in text)
    goal_opts = goal["goal_options"]
    goal_opts = [str(o) for o in (goal_opts.items() if isinstance(goal_opts, dict) else goal_opts)]
    chosen = [str(v).lower() for v in options.values()]
    opt_hits = sum(1 for g in goal_opts if any(g.lower() == c or g.lower() in c or c in g.lower() for c in chosen))
    r_att = attr_hits / len(goal["attributes"])
    r_option = opt_hits / len(goal_opts) if goal_opts else 1
    r_price = prod["price"] <= goal["price_upper"]
    total = (attr_hits + opt_hits + r_price) / (len(goal["attributes"]) + len(goal_opts) + 1) * r_type
    return total, {"query_match": query_match, "category_match": category_match, "title_score": title_score,
                   "num_attr_matches": attr_hits, "num_option_matches": opt_hits, "r_type": r_type,
                   "r_att": r_att, "r_option": r_option, "r_price": r_price}


class Env:
    """One slot: a WebAgentTextEnv in text mode, reduced to the pages and buttons agents use."""

    def __init__(self, catalog: Catalog, max_history: int):
        self.catalog, self.max_history = catalog, max_history
        self.lock = threading.Lock()
        self.session = None

    def reset(self, idx) -> None:
        # As SimServer.receive's `self.goals[idx]`: IndexError "list index out of range" for an idx
        # beyond the goals, TypeError for a non-int; raised after the pool popped the slot.
        self.goal = self.catalog.goals[idx]
        self.session, self.history = idx, 2  # upstream: the prompt + "ok"
        self.page, self.keywords, self.page_no, self.asin, self.options, self.sub = "index", "", 1, None, {}, ""
        self.results: list[dict] = []

    def _header(self) -> list[str]:
        return ["Instruction:", self.goal["instruction_text"]]

    def render(self) -> tuple[str, list[str], bool]:
        head = self._header()
        if self.page == "index":
            return " [SEP] ".join(head + ["Search"]), [], True
        if self.page == "results":
            shown = self.results[(self.page_no - 1) * PAGE_SIZE:self.page_no * PAGE_SIZE]
            parts = head + ["Back to Search", f"Page {self.page_no} (Total results: {len(self.results)})"]
            buttons = ["back to search"]
            if self.page_no > 1:
                parts.append("< Prev")
                buttons.append("< prev")
            if self.page_no * PAGE_SIZE < len(self.results):
                parts.append("Next >")
                buttons.append("next >")
            for prod in shown:
                parts += [prod["asin"], prod.get("title", ""), f"¥{prod['price']:.2f}"]
                buttons.append(prod["asin"].lower())
            return " [SEP] ".join(parts), buttons, False
        prod = self.catalog.by_asin[self.asin]
        if self.page == "item":
            parts, buttons = head + ["Back to Search", "< Prev"], ["back to search", "< prev"]
            for name, values in prod["options"].items():
                parts.append(name)
                parts += values
            parts += [prod.get("title", ""), f"Price: ¥{prod['price']:.2f}", "Rating: N.A.",
                      "Description", "Features", "Reviews", "Attributes", "Buy Now"]
            buttons += list(SUB_PAGES) + ["buy now"] + [v for vs in prod["options"].values() for v in vs]
            if self.options:
                parts.insert(2, "You have clicked " + ", ".join(self.options.values()) + ".")
            return " [SEP] ".join(parts), buttons, False
        if self.page == "sub":
            body = {"description": prod.get("full_description", ""), "features": prod.get("small_description", ""),
                    "reviews": "", "attributes": ", ".join(prod.get("attribute") or [])}[self.sub]
            return " [SEP] ".join(head + ["Back to Search", "< Prev", str(body)]), ["back to search", "< prev"], False
        return " [SEP] ".join(["Thank you for shopping with us!", "Your score (min 0.0, max 1.0)",
                               f"{self.last_reward}"]), [], False

    def step(self, text: str) -> dict:
        text = text.replace("\\n", "\n")
        self.history += 1
        action = text.split("\nAction: ")[1] if "\nAction: " in text else text
        m = re.match(r"(.+)\[(.+)\]", action)
        name, arg = (m.group(1), m.group(2).lower()) if m else (action, None)
        _, buttons, _ = self.render()
        status = {"reward": 0, "done": False}
        if name == "search" and arg:
            self.keywords, self.page_no, self.page = arg, 1, "results"
            self.results, self.asin, self.options = self.catalog.search(arg), None, {}
        elif name == "click" and arg in buttons and arg != "search":
            status = self._click(arg)
        obs, buttons, has_search = self.render()
        obs += f"\n\n搜索功能是否可用: {has_search}\n\n可点击的按钮: {json.dumps(buttons, ensure_ascii=False)}"
        done = status["done"]
        return {"done": done, "reward": status["reward"], "instruction": obs, "message": "Continue interaction",
                "idx": self.session, "reward_detail": status.get("reward_detail", {}),
                "purchase": status.get("purchase", {}), "goal": status.get("goal", {}),
                "over": self.history > self.max_history or done}

    def _click(self, arg: str) -> dict:
        if arg == "buy now":
            prod = self.catalog.by_asin[self.asin]
            total, detail = reward(prod, self.goal, self.options)
            self.page, self.last_reward = "done", total
            purchase = {"asin": prod["asin"], "category": prod.get("category", ""), "query": prod["query"],
                        "name": prod.get("title", ""), "product_category": prod.get("product_category", ""),
                        "attributes": prod.get("attribute") or [], "price": prod["price"],
                        "options": dict(self.options)}
            return {"reward": total, "done": True, "reward_detail": detail, "purchase": purchase, "goal": self.goal}
        if arg == "back to search":
            self.page, self.keywords, self.asin, self.options = "index", "", None, {}
        elif arg == "next >" and self.page == "results":
            self.page_no += 1
        elif arg == "< prev" and self.page == "results":
            self.page_no -= 1
        elif arg == "< prev" and self.page == "sub":
            self.page = "item"
        elif arg == "< prev" and self.page == "item":
            self.page, self.options = "results", {}
        elif arg in SUB_PAGES:
            self.page, self.sub = "sub", arg
        elif self.page == "results":
            self.page, self.asin = "item", arg.upper()
        else:  # an option value on the item page
            prod = self.catalog.by_asin[self.asin]
            for name, values in prod["options"].items():
                if arg in values:
                    self.options[name] = arg
        return {"reward": 0.0, "done": False}


class Pool:
    def __init__(self, envs: list[Env], retries: int, delay: float, seed: int, error_rate: float,
                 fail_once: set[int] | None = None, fail_over_once: set[int] | None = None):
        self.envs, self.retries, self.delay, self.seed, self.error_rate = envs, retries, delay, seed, error_rate
        self.fail_once = set(fail_once or ())
        self.fail_over_once = set(fail_over_once or ())
        self.free: set[int] = set(range(len(envs)))
        self.pops, self.latest = 0, {}  # the fence's leases: pops so far, each slot's latest pop
        self.lock = threading.Lock()
        self.counts = {"reset": 0, "reset_error": 0, "interact": 0, "release_one": 0, "release_all": 0,
                       "no_slot": 0, "bad_slot": 0, "already_free": 0, "auto_release": 0, "probe": 0, "injected": 0}
        self.waiting = 0  # requests now waiting for a free slot (a test waits for this, not for time)

    def holds(self, lease: str) -> bool:
        """The fence's test: is the slot of `lease` ("SLOT:n") still held by its n-th pop?"""
        idx, _, n = lease.partition(":")
        if not (idx.isdigit() and n.isdigit()):
            return False
        with self.lock:
            return int(idx) not in self.free and self.latest.get(int(idx)) == int(n)

    def handle(self, data, popped: list | None = None) -> dict:
        """pack_api's answer to `data`; the lease of a slot it pops is appended to `popped`."""
        if not isinstance(data, dict):
            return {"error": "No JSON data provided"}
        action, env_idx = data.get("action"), data.get("env_idx")
        with self.lock:
            if action == "release_all":
                self.counts["release_all"] += 1
                self.free |= set(range(len(self.envs)))
                return {"message": "All environments have been initialized"}
            if action == "release_one":
                if isinstance(env_idx, int):
                    self.counts["release_one"] += 1
                    if env_idx not in self.free:
                        self.free.add(env_idx)
                        return {"message": f"Environment {env_idx} has been released"}
                    self.counts["already_free"] += 1
                    return {"message": f"Environment {env_idx} is already free"}
                self.counts["probe"] += 1
                return {"error": NO_INDEX}
        try:
            if env_idx is None:
                got = self._pop(popped)
                if got is None:
                    with self.lock:
                        self.counts["no_slot"] += 1
                    return {"error": NO_SLOT}
                env_idx = got
            if not 0 <= env_idx < len(self.envs):  # test-only count; upstream raises IndexError at envs[env_idx]
                with self.lock:
                    self.counts["bad_slot"] += 1
            env = self.envs[env_idx]
            with env.lock:
                result = self._run(env, env_idx, action, data)
            if result.get("over"):
                with self.lock:
                    self.free.add(env_idx)
                    self.counts["auto_release"] += 1
                    if env.session in self.fail_over_once:  # test-only, see _Unserialisable
                        self.fail_over_once.discard(env.session)
                        result = {**result, "reward_detail": {**result["reward_detail"], "r_price": _Unserialisable()}}
            return result
        except Exception as exc:  # upstream: {'result': {'error': str(e)}}
            return {"error": str(exc)}

    def _pop(self, popped: list | None) -> int | None:
        """A free slot, waiting retries x delay for one (upstream: check, sleep, MAX_RETRIES times);
        its lease ("SLOT:n", the n-th pop) is appended to `popped`."""
        with self.lock:
            self.waiting += 1
        try:
            for _attempt in range(self.retries):
                with self.lock:
                    if self.free:
                        got = min(self.free)
                        self.free.discard(got)
                        self.pops += 1
                        self.latest[got] = self.pops
                        if popped is not None:
                            popped.append(f"{got}:{self.pops}")
                        return got
                time.sleep(self.delay)
            return None
        finally:
            with self.lock:
                self.waiting -= 1

    def _run(self, env: Env, env_idx: int, action, data) -> dict:
        if action == "reset":
            if data.get("idx") is None:
                raise ValueError("reset action requires idx parameter")
            try:
                if isinstance(data["idx"], int) and data["idx"] in self.fail_once:  # test-only: env.reset raising
                    self.fail_once.discard(data["idx"])
                    raise RuntimeError("injected reset fault (fake_shopsim --fail-reset-once)")
                env.reset(data["idx"])
            except Exception:
                with self.lock:
                    self.counts["reset_error"] += 1
                raise
            with self.lock:
                self.counts["reset"] += 1
            # shop_agent.py:38 returns env.instruction_text = the index page's `#instruction-text h4`
            # text (search_page.html:18): "Instruction: " and the goal's instruction.
            res = {"instruction": "Instruction: " + env.goal["instruction_text"], "instruction_simple": env.goal["instruction_simple"],
                   "goal_options": env.goal["goal_options"], "message": f"Task {data['idx']} started",
                   "env_idx": env_idx, "idx": data["idx"]}
            if env.goal["user_persona"]:
                res["user_persona"], res["reason_key"] = env.goal["user_persona"], env.goal["reason_key"]
            return res
        if action == "interact":
            if data.get("response") is None:
                raise ValueError("interact action requires response parameter")
            with self.lock:
                self.counts["interact"] += 1
            if self.error_rate and _unit(self.seed, "fault", env.session, env.history) < self.error_rate:
                with self.lock:
                    self.counts["injected"] += 1
                raise RuntimeError("injected fault (fake_shopsim --inject-error-rate)")
            return {**env.step(str(data["response"])), "env_idx": env_idx}
        raise ValueError(f"Unknown action type: {action}, supported actions: 'reset', 'interact'")

    def debug(self) -> dict:
        with self.lock:
            free = sorted(self.free)
            taken = sorted(set(range(len(self.envs))) - self.free)
            return {"max": len(self.envs), "free": len(free), "taken": taken, "waiting": self.waiting,
                    "counts": dict(self.counts)}


class _Unserialisable:
    """A value json.dumps refuses (upstream, e.g. a numpy bool in reward_detail): the answer of an
    interact that ended the episode then fails in pack_api's `jsonify` (pack_api.py:120, outside
    its try) after :112-113 freed the slot, and Flask answers its 500 page (--fail-over-once)."""


def _unit(*parts) -> float:
    h = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2 ** 64


# Werkzeug 2.1.2's error pages (exceptions.py:107-119 get_body, :172-183 BadRequest, :710-725
# InternalServerError): what Flask answers when pack_api never gets to answer itself.
FLASK_PAGES = {
    400: ("Bad Request", "The browser (or proxy) sent a request that this server could not understand."),
    500: ("Internal Server Error", "The server encountered an internal error and was unable to complete your "
          "request. Either the server is overloaded or there is an error in the application."),
}


def flask_error(code: int) -> tuple[int, bytes, str]:
    name, text = FLASK_PAGES[code]
    page = f"<!doctype html>\n<html lang=en>\n<title>{code} {name}</title>\n<h1>{name}</h1>\n<p>{text}</p>\n"
    return code, page.encode(), "text/html; charset=utf-8"


def is_json(content_type: str | None) -> bool:
    """werkzeug sansio/request.py:538-547: the mimetype (parameters dropped, lower case) is
    application/json or application/*+json."""
    mt = (content_type or "").split(";")[0].strip().lower()
    return mt == "application/json" or (mt.startswith("application/") and mt.endswith("+json"))


def make_handler(pool: Pool, verbose: bool, instance: str | None = None):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, code: int, body: bytes, ctype: str = "application/json", lease: str | None = None) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            if instance:
                self.send_header(INSTANCE_HEADER, instance)
                if lease:
                    self.send_header(LEASE_HEADER, lease)
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):  # noqa: N802
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path != "/api/shop_agent":
                return self._send(404, b"Not Found", "text/html")
            claimed = self.headers.get(INSTANCE_HEADER)
            if instance and claimed and claimed != instance:  # the fence: pack_api never sees it
                return self._send(200, json.dumps({"result": {"error": STALE_SLOT_ERROR}}).encode())
            lease = self.headers.get(LEASE_HEADER)
            if instance and lease is not None and not pool.holds(lease):  # the fence, as above
                return self._send(200, json.dumps({"result": {"error": FREED_SLOT_ERROR}}).encode())
            # pack_api.py:61 `data = request.json` under the fork's Flask 2.1.2 + Werkzeug 2.1.2
            # (shop_env/requirements.txt; env/conda/shopsim.yml): a body whose mimetype is not JSON,
            # or that does not parse, is Flask's 400 page (werkzeug request.py:569-571, 577-595, 608-614; flask
            # wrappers.py:126-133); JSON null is None -> "No JSON data provided" (pack_api.py:62-64).
            if not is_json(self.headers.get("Content-Type")):
                return self._send(*flask_error(400))
            try:
                data = json.loads(raw)
            except ValueError:
                return self._send(*flask_error(400))
            if data is not None and not isinstance(data, dict):
                return self._send(*flask_error(500))  # pack_api.py:66 `data.get`, outside its try
            popped: list[str] = []
            result = pool.handle(data, popped)
            try:
                out = json.dumps({"result": result}, ensure_ascii=False).encode()
            except TypeError:  # pack_api.py:120 `jsonify`, outside its try: Flask's 500 page
                return self._send(*flask_error(500))
            self._send(200, out, lease=popped[0] if popped else None)

        def do_GET(self):  # noqa: N802
            if self.path == "/debug/slots":  # test-only extension
                return self._send(200, json.dumps(pool.debug()).encode())
            code = 405 if self.path == "/api/shop_agent" else 404
            self._send(code, b"Method Not Allowed" if code == 405 else b"Not Found", "text/html")

        def log_message(self, fmt, *args):
            if verbose:
                sys.stderr.write("fake_shopsim: " + fmt % args + "\n")

    return Handler


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=0, help="prices and price limits (upstream: random at start)")
    ap.add_argument("--tasks", required=True, help="catalog in ShopSimulator's record format (.json/.jsonl[.gz])")
    ap.add_argument("--max-history", type=int, default=42)
    ap.add_argument("--slot-seeds", default="", help="one price seed per slot, comma-separated (each upstream "
                    "slot draws its own prices); default: --seed for every slot")
    ap.add_argument("--inject-error-rate", type=float, default=0.0, help="test-only: share of failing interacts")
    ap.add_argument("--fail-reset-once", default="", help="test-only: task indices whose first reset fails "
                    "after the pop (comma-separated)")
    ap.add_argument("--fail-over-once", default="", help="test-only: task indices whose first episode-ending "
                    "interact answers Flask's 500 page after freeing the slot (comma-separated)")
    ap.add_argument("--startup-delay", type=float, default=0.0, help="seconds before binding (env builds)")
    ap.add_argument("--instance-fence", action="store_true", help="our launcher's fence (see module doc)")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    slots = int(os.environ.get("SHOPSIM_ENV_MAX_NUM", "20"))
    retries = int(os.environ.get("SHOPSIM_RESET_RETRIES", "5"))
    delay = float(os.environ.get("SHOPSIM_RESET_DELAY", "5"))
    records = read_records(args.tasks)
    seeds = [int(x) for x in args.slot_seeds.split(",")] if args.slot_seeds else [args.seed] * slots
    if len(seeds) != slots:
        ap.error(f"--slot-seeds has {len(seeds)} seeds for {slots} slots (SHOPSIM_ENV_MAX_NUM)")
    catalogs = {seed: Catalog(records, seed) for seed in sorted(set(seeds))}
    catalog = catalogs[seeds[0]]
    time.sleep(args.startup_delay)
    fail_once = {int(x) for x in args.fail_reset_once.split(",") if x}
    fail_over_once = {int(x) for x in args.fail_over_once.split(",") if x}
    pool = Pool([Env(catalogs[seed], args.max_history) for seed in seeds], retries, delay, args.seed,
                args.inject_error_rate, fail_once, fail_over_once)
    instance = uuid.uuid4().hex if args.instance_fence else None
    return serve(args.host, args.port, make_handler(pool, args.verbose, instance),
                 lambda url: f" * fake_shopsim: {len(catalog.goals)} tasks, {slots} slots, running on {url}")


if __name__ == "__main__":
    sys.exit(main())
