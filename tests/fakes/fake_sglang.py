#!/usr/bin/env python3
"""Stand-in for `python -m sglang.launch_server` (SGLang 0.5.15.post1), for tests.

    python tests/fakes/fake_sglang.py --model-path TOKDIR --tp-size 1 --dp-size 2 \
        --host 127.0.0.1 --port P --context-length 32768 [--random-seed S] \
        [--fake-policy POLICY.json] [--latency-ms 20] [--fake-sampling task|episode]

Flags: every server flag of SGLang 0.5.15.post1 is accepted (the list in
env/flags/sglang_server_flags.txt, or $FAKE_SGLANG_FLAGS_FILE), unknown ones are
rejected with argparse's "unrecognized arguments" and exit 2, as the real parser does (prefix
abbreviations such as --tp included). Fake-only: --fake-policy (default: MODEL_PATH/fake_policy.json
when it exists: the policy is the fake model's "weights", so an HF export carries its own),
--latency-ms (default $FAKE_SGLANG_LATENCY_MS), --fake-sampling; $FAKE_SGLANG_START_DELAY (seconds
before the port binds: a slow start, for bench/round_gpu_idle.py) and $FAKE_SGLANG_JIT_DELAY (seconds
more on a cold FlashInfer JIT cache: _jit_on_a_cold_cache).

Endpoints: GET /health (200), GET /health_generate, GET /model_info; slime's control calls in SGLang's
shapes and status codes (sglang_control.py): GET /server_info and /get_server_info (ServerArgs' fields
slime reads: tp/pp/dp/ep_size, disaggregation_mode, enable_memory_saver, ...), POST /abort_request
{"abort_all": true} (a request waiting out --latency-ms answers finish_reason abort), GET /v1/loads,
GET|POST /flush_cache (400 while a request is in flight); POST /generate with SGLang's
answer shape (text -- ending in the EOS text only with sampling_params skip_special_tokens=False and
no_stop_trim=True, as slime sends them --, output_ids, meta_info: id, finish_reason, prompt_tokens, completion_tokens,
cached_tokens, output_token_logprobs as [logprob, token_id, null]); HTTP 400 {"error": {"message"}}
when input + max_new_tokens exceeds --context-length. The tokenizer is loaded from --model-path
(tokenizer.json, as tests/support/tokenizer.py writes it).

Policy: a pure function of (seed, task, skills shown, turn), never of arrival order or time. It
decodes the prompt, finds the task by its instruction in the first user message (the policy
file's "tasks"), the skills shown by "marker_regex" (default `[S-<id>]`) and planted texts in the
system message, and the turn by the number of assistant turns so far. The episode succeeds when
hash(seed, task, sorted shown skills) < base_success + sum of the shown skills' deltas; it plays
search[query] -> click[gold asin] -> click[gold option] -> click[buy now]. A failing episode
takes one failure mode: wrong_product, wrong_option, or dawdle (no action until the turn limit).
Sampling (--fake-sampling): `task` (default, the eval server): one draw per (task, skills shown),
so every episode of a task ends alike -- a stand-in for its pass rate. `episode` (the training
engines slime starts; tests/fakes/slime_stub): every episode draws on its own, as temperature
sampling does, so a group of a task with success chance p is all-failed with chance (1-p)^n and
all-equal groups happen (slime's dynamic filter must cope: docs/training.md). The first response
names the episode's draw ("草稿 #<draw>"), and later turns read it back from the prompt, so an
episode's turns agree with each other; the draw is `s<seed>` when the request carries slime's
`sampling_seed` (deterministic inference: same seed, same episode) and otherwise the next number
of a counter per (task, skills shown): deterministic in arrival order.
An evaluation's request (its `rid` starts with `shopsimrl-eval/`, as the toolkit's eval client
names them) is drawn per task in either mode: the pass-rate stand-in belongs to evaluation, not to
a server, so val played on the job's engines (the one-job mode) and on the eval server agree.
A `rid` still in flight is refused as SGLang does (HTTP 400 "Duplicate request ID detected").
Thinking: when the prompt ends in an open reasoning block (`<think>\n`, Qwen3.5's generation
prompt) the response is a short reasoning, `\n</think>\n\n`, then the answer; otherwise the
answer alone.
Policy file (JSON): {"base_success": 0.3, "marker_regex": "...", "effects": [{"skill": "ID",
"delta": 0.4}, {"text": "planted text", "delta": -0.3}], "failure_modes": {"wrong_product": 0.5,
"wrong_option": 0.3, "dawdle": 0.2}, "tasks": [{"instruction", "query", "asin", "options":
[...], "base_success"?}]}. tests/fakes/shop_fixture.py writes a matching catalog and policy.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlsplit

try:  # imported as tests' `fakes.<name>`, or run as a script from tests/fakes/
    from fakes import sglang_control
    from fakes.httpserve import serve
    from fakes.modelled_wait import wait
except ImportError:
    import sglang_control
    from httpserve import serve
    from modelled_wait import wait

HERE = Path(__file__).resolve().parent
FLAGS_FILE = HERE.parents[1] / "env" / "flags" / "sglang_server_flags.txt"
TYPED = {("--model-path", "--model"): str, ("--tp-size", "--tensor-parallel-size"): int,
         ("--dp-size", "--data-parallel-size"): int, ("--port",): int, ("--host",): str,
         ("--context-length",): int, ("--random-seed",): int,
         # read back by slime from /server_info (external.py:103-106, sglang_engine.py:157-169)
         ("--pp-size", "--pipeline-parallel-size"): int, ("--ep-size", "--expert-parallel-size", "--ep"): int,
         ("--disaggregation-mode",): str, ("--disaggregation-bootstrap-port",): int}
DEFAULT_MARKER = r"\[S-([A-Za-z0-9_.:-]+)\]"
DRAW = re.compile(r"草稿 #([a-z0-9]+)")  # the episode's draw, named in its first response
OPEN_THINK = "<think>\n"  # Qwen3.5's generation prompt ends with it: the model reasons first
# The rid prefix of an evaluation's requests (pyhelpers/evaluate/episode.py EVAL_RID_PREFIX): drawn per
# task whatever --fake-sampling says (see Sampling above)
EVAL_RID_PREFIX = "shopsimrl-eval/"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="sglang.launch_server")
    for names, kind in TYPED.items():
        ap.add_argument(*names, type=kind, dest=names[0][2:].replace("-", "_"),
                        required=names[0] == "--model-path")
    path = Path(os.environ.get("FAKE_SGLANG_FLAGS_FILE", FLAGS_FILE))
    flags = [line for line in path.read_text().splitlines() if line.startswith("--")]
    taken = {n for names in TYPED for n in names}
    for flag in flags:
        if flag.startswith("--") and flag not in taken:
            ap.add_argument(flag, nargs="?", const=True, dest="x_" + flag[2:].replace("-", "_"))
    ap.add_argument("--fake-policy", help="fake only: policy JSON")
    ap.add_argument("--latency-ms", type=float, default=float(os.environ.get("FAKE_SGLANG_LATENCY_MS", "0") or 0),
                    help="fake only: fixed delay per /generate (default $FAKE_SGLANG_LATENCY_MS or 0)")
    ap.add_argument("--fake-sampling", choices=("task", "episode"), default="task",
                    help="fake only: one outcome per task (eval) or one draw per episode (training)")
    return ap


def unit(*parts) -> float:
    h = hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).digest()
    return int.from_bytes(h[:8], "big") / 2 ** 64


def between(text: str, start: str, end: str = "<|im_end|>") -> str:
    at = text.find(start)
    if at < 0:
        return ""
    at += len(start)
    stop = text.find(end, at)
    return text[at:stop if stop >= 0 else len(text)]


class Policy:
    def __init__(self, spec: dict, seed: int, sampling: str = "task"):
        self.seed = spec.get("seed", seed)
        self.per_episode = sampling == "episode"
        self._draws: Counter = Counter()  # (task, skills shown) -> episodes drawn so far
        self._lock = threading.Lock()
        self.base = float(spec.get("base_success", 0.3))
        self.marker = re.compile(spec.get("marker_regex", DEFAULT_MARKER))
        self.effects = spec.get("effects", [])
        self.modes = spec.get("failure_modes", {"wrong_product": 0.5, "wrong_option": 0.3, "dawdle": 0.2})
        self.tasks = sorted(spec.get("tasks", []), key=lambda t: -len(t["instruction"]))

    def decide(self, prompt: str, sampling_seed: int | None = None, evaluation: bool = False) -> str:
        system = between(prompt, "<|im_start|>system\n")
        first_user = between(prompt, "<|im_start|>user\n")
        task = next((t for t in self.tasks if t["instruction"] in first_user), None)
        key = task["instruction"] if task else first_user[:200]
        shown = sorted(set(self.marker.findall(system)))
        p = float(task.get("base_success", self.base)) if task else 0.0
        planted = []
        for eff in self.effects:
            if ("skill" in eff and eff["skill"] in shown) or ("text" in eff and eff["text"] in system):
                p += float(eff.get("delta", 0.0))
                planted.append(eff.get("skill") or eff.get("text"))
        turn = prompt.count("<|im_start|>assistant") - 1
        # an evaluation's request (its rid says so) is drawn per task on any server: the eval server's
        # and the job's engines' val of one round must not differ for a reason no real run has
        draw = self._draw(prompt, turn, key, shown, sampling_seed) if self.per_episode and not evaluation else None
        extra = () if draw is None else (draw,)
        success = unit(self.seed, key, shown, sorted(planted), *extra) < p
        mode = "success" if success else self._mode(unit(self.seed, key, shown, "mode", *extra))
        answer = self._act(task, mode, turn, prompt)
        if not prompt.endswith(OPEN_THINK):
            return answer if draw is None or turn else answer.replace("\n", f"（草稿 #{draw}）\n", 1)
        reasoning = "看一下页面再决定。" if turn else "先搜索要买的商品。"
        if draw is not None and not turn:
            reasoning = f"草稿 #{draw}：{reasoning}"
        return f"{reasoning}\n</think>\n\n{answer}"

    def _draw(self, prompt: str, turn: int, key: str, shown: list[str], sampling_seed: int | None) -> str | None:
        """The episode's draw: new on its first turn, read back from its first response later."""
        if turn > 0:
            first = between(prompt, "<|im_start|>assistant\n", "<|im_start|>")
            m = DRAW.search(first)
            return m.group(1) if m else None
        if sampling_seed is not None:
            return f"s{int(sampling_seed)}"
        with self._lock:
            n = self._draws[(key, tuple(shown))]
            self._draws[(key, tuple(shown))] += 1
        return f"n{n}"

    def _mode(self, u: float) -> str:
        total = sum(self.modes.values()) or 1.0
        acc = 0.0
        for name in sorted(self.modes):
            acc += self.modes[name] / total
            if u < acc:
                return name
        return sorted(self.modes)[-1]

    def _act(self, task: dict | None, mode: str, turn: int, prompt: str) -> str:
        last_obs = prompt[prompt.rfind("<|im_start|>user\n"):]
        at = last_obs.rfind("可点击的按钮: ")
        try:
            buttons = json.loads(last_obs[at + len("可点击的按钮: "):].split("<|im_end|>")[0]) if at >= 0 else []
        except ValueError:
            buttons = []
        query = task["query"] if task else between(prompt, "<|im_start|>user\n").split("\n")[0][:20]
        if turn == 0 or not buttons:
            return f"Thought: 先搜索需要的商品。\nAction: search[{query}]"
        if mode == "dawdle":
            return "Thought: 让我再想一想，先不操作。"
        gold = (task or {}).get("asin", "").lower()
        if "buy now" in buttons:
            opts = [b for b in buttons if b not in ("back to search", "< prev", "description", "features",
                                                   "reviews", "attributes", "buy now")]
            if "You have clicked" in last_obs or not opts or turn >= 6:
                return "Thought: 规格已选好，购买。\nAction: click[buy now]"
            want = [o.lower() for o in (task or {}).get("options", [])]
            good = [o for o in opts if o in want]
            bad = [o for o in opts if o not in want]
            pick = (bad[0] if mode == "wrong_option" and bad else (good or opts)[0])
            return f"Thought: 选择规格。\nAction: click[{pick}]"
        products = [b for b in buttons if b not in ("back to search", "next >", "< prev")]
        if not products:
            return f"Thought: 重新搜索。\nAction: search[{query}]"
        others = [b for b in products if b != gold]
        pick = others[0] if mode == "wrong_product" and others else (gold if gold in products else products[0])
        return f"Thought: 这个商品看起来合适。\nAction: click[{pick}]"


class Model:
    def __init__(self, args):
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(str(Path(args.model_path) / "tokenizer.json"))
        self.eos = self.tok.token_to_id("<|im_end|>")
        self.context_length = args.context_length or 32768
        self.latency = args.latency_ms / 1000.0
        default = Path(args.model_path) / "fake_policy.json"  # optional; a --fake-policy given must exist
        policy_file = Path(args.fake_policy) if args.fake_policy else default if default.is_file() else None
        spec = json.loads(policy_file.read_text(encoding="utf-8")) if policy_file else {}
        self.policy = Policy(spec, args.random_seed or 0, args.fake_sampling)
        self.model_path = args.model_path
        self.args = args
        self.cond = threading.Condition()
        self.inflight = 0
        self.rids: set[str] = set()  # the rids of the requests in flight (SGLang refuses a second)
        self.aborts = 0  # bumped by every /abort_request: a request waiting out its latency ends

    def update_weights(self, raw: bytes) -> tuple[int, dict]:
        """POST /update_weights_from_disk {"model_path"}: the policy of that directory's
        fake_policy.json from now on (the stand-in of new weights; the draw counters, the engine's
        sampling state, go on). SGLang answers {"success", "message", "num_paused_requests"}
        (http_server.py:1130-1154, io_struct.py:1532-1536); one it cannot load is success false, HTTP 400."""
        try:
            path = Path(json.loads(raw)["model_path"]) / "fake_policy.json"
            spec = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, KeyError, TypeError, OSError) as exc:
            return 400, {"success": False, "message": f"Failed to update weights: {exc}", "num_paused_requests": 0}
        new = Policy(spec, self.args.random_seed or 0, self.args.fake_sampling)
        with self.cond:
            new._draws = self.policy._draws
            self.policy = new
        return 200, {"success": True, "message": "Succeeded to update model weights.", "num_paused_requests": 0}

    def server_info(self) -> dict:
        """GET /server_info: ServerArgs as a dict plus scheduler info, internal_states, version
        (SGLang http_server.py:705-727): the fields slime reads, typed and defaulted as in
        server_args.py (tests/support/sglang_shapes.py); no num_gpus, as SGLang has none."""
        a = self.args
        return {"model_path": a.model_path, "tokenizer_path": a.model_path, "host": a.host or "127.0.0.1",
                "port": a.port, "context_length": a.context_length, "random_seed": a.random_seed,
                "tp_size": a.tp_size or 1, "pp_size": a.pp_size or 1, "dp_size": a.dp_size or 1,
                "ep_size": a.ep_size or 1, "disaggregation_mode": a.disaggregation_mode or "null",
                "disaggregation_bootstrap_port": a.disaggregation_bootstrap_port or 8998,
                "encoder_only": bool(a.x_encoder_only), "enable_memory_saver": bool(a.x_enable_memory_saver),
                "skip_server_warmup": bool(a.x_skip_server_warmup), "enable_metrics": bool(a.x_enable_metrics),
                "dtype": a.x_dtype or "auto",
                "internal_states": [{} for _ in range(a.dp_size or 1)], "version": sglang_control.SGLANG_VERSION,
                "kv_events": None}

    def abort_all(self) -> None:
        with self.cond:
            self.aborts += 1
            self.cond.notify_all()

    def _wait_latency(self) -> bool:
        """Wait out --latency-ms; False when an /abort_request came meanwhile."""
        with self.cond:
            seen = self.aborts

        def until_aborted(seconds: float) -> bool:  # True: cut short (modelled_wait records what was waited)
            with self.cond:
                return self.cond.wait_for(lambda: self.aborts != seen, timeout=seconds)

        wait("FAKE_SGLANG_LATENCY_MS", self.latency, sleep=until_aborted)  # decoding (0: none)
        with self.cond:
            return self.aborts == seen

    def generate_one(self, input_ids: list[int], params: dict, return_logprob: bool,
                     evaluation: bool = False) -> tuple[int, dict]:
        max_new = int(params.get("max_new_tokens", 128))
        n_in = len(input_ids)
        if n_in >= self.context_length:
            return 400, {"error": {"message": f"The input ({n_in} tokens) is longer than the model's context "
                                              f"length ({self.context_length} tokens)."}}
        if n_in + max_new > self.context_length:
            return 400, {"error": {"message": (
                f"Requested token count exceeds the model's maximum context length of {self.context_length} "
                f"tokens. You requested a total of {n_in + max_new} tokens: {n_in} tokens from the input "
                f"messages and {max_new} tokens for the completion. Please reduce the number of tokens in "
                "the input messages or the completion to fit within the limit.")}}
        # The scheduler's checks (what the tokenizer manager let through): max_req_len = L - 1
        # (tp_worker.py:455-458, a KV pool large enough assumed), a prompt of max_req_len - 5 tokens or
        # more aborted as 400 (tp_worker.py:465, managers/utils.py:177-192), max_new_tokens cut to
        # max_req_len - prompt - 1 (scheduler.py:1905-1916).
        max_req_len = self.context_length - 1
        if n_in >= max_req_len - 5:
            return 400, {"error": {"message": (
                f"Input length ({n_in} tokens) exceeds the maximum allowed length ({max_req_len - 5} tokens). "
                "Use a shorter input or enable --allow-auto-truncate.")}}
        max_new = max(0, min(max_new, max_req_len - n_in - 1))
        prompt = self.tok.decode(input_ids, skip_special_tokens=False)
        action = self.policy.decide(prompt, params.get("sampling_seed"), evaluation)
        ids = self.tok.encode(action, add_special_tokens=False).ids + [self.eos]
        finish = {"type": "stop", "matched": self.eos}
        if len(ids) > max_new:
            ids, finish = ids[:max_new], {"type": "length", "length": max_new}
        digest = hashlib.sha256(json.dumps(input_ids).encode()).hexdigest()
        meta = {"id": digest[:32], "finish_reason": finish, "prompt_tokens": n_in,
                "completion_tokens": len(ids), "cached_tokens": 0}
        if return_logprob:
            meta["output_token_logprobs"] = [[-2.0 * unit(digest, i, t), t, None] for i, t in enumerate(ids)]
        # SGLang's text: the matched stop token trimmed unless no_stop_trim, special tokens dropped
        # unless skip_special_tokens is False (both default True/False: sampling_params.py:107-109,
        # detokenizer_manager.py:171-200); output_ids always end in it. slime sends the opposite.
        shown = ids[:-1] if finish["type"] == "stop" and not params.get("no_stop_trim", False) else ids
        text = self.tok.decode(shown, skip_special_tokens=params.get("skip_special_tokens", True) is not False)
        return 200, {"text": text, "output_ids": ids, "meta_info": meta}

    def generate(self, body: dict) -> tuple[int, object]:
        params = body.get("sampling_params") or {}
        ret_lp = bool(body.get("return_logprob", False))
        inputs = body.get("input_ids")
        if inputs is None and body.get("text") is not None:
            texts = body["text"] if isinstance(body["text"], list) else [body["text"]]
            inputs = [self.tok.encode(t, add_special_tokens=False).ids for t in texts]
            inputs = inputs if isinstance(body["text"], list) else inputs[0]
        if not isinstance(inputs, list) or not inputs:
            return 400, {"error": {"message": "Either text or input_ids should be provided."}}
        rids = self._rids(body.get("rid"))
        if isinstance(rids, tuple):
            return rids
        with self.cond:
            taken = next((r for r in rids if r in self.rids), None)
            if taken is not None:  # tokenizer_manager.py:2886-2887, a ValueError: HTTP 400 (http_server.py:833-835)
                return 400, {"error": {"message": f"Duplicate request ID detected: {taken}"}}
            self.rids.update(rids)
            self.inflight += 1
        try:
            if self.latency and not self._wait_latency():
                return 200, self._aborted(inputs, ret_lp)
            return self._generate(inputs, params, ret_lp, evaluation=bool(rids) and all(
                r.startswith(EVAL_RID_PREFIX) for r in rids))
        finally:
            with self.cond:
                self.inflight -= 1
                self.rids.difference_update(rids)

    @staticmethod
    def _rids(rid) -> list[str] | tuple[int, dict]:
        """The request's rids (a str, a list for a batch, or none), or SGLang's 400 for a batch that
        names one twice (io_struct.py:316-322)."""
        if rid is None:
            return []
        rids = [str(r) for r in rid] if isinstance(rid, list) else [str(rid)]
        dup = sorted({r for r in rids if rids.count(r) > 1})
        if dup:
            return 400, {"error": {"message": f"Duplicate request IDs detected within the request: {dup}"}}
        return rids

    @staticmethod
    def _aborted(inputs: list, ret_lp: bool) -> object:
        """SGLang's answer to a request aborted before it produced a token."""
        def one(ids):
            meta = {"id": hashlib.sha256(json.dumps(ids).encode()).hexdigest()[:32],
                    "finish_reason": {"type": "abort", "message": "Abort before prefill"},
                    "prompt_tokens": len(ids), "completion_tokens": 0, "cached_tokens": 0}
            if ret_lp:
                meta["output_token_logprobs"] = []
            return {"text": "", "output_ids": [], "meta_info": meta}
        return [one(ids) for ids in inputs] if isinstance(inputs[0], list) else one(inputs)

    def _generate(self, inputs: list, params: dict, ret_lp: bool, evaluation: bool) -> tuple[int, object]:
        if isinstance(inputs[0], list):
            outs = [self.generate_one(ids, params, ret_lp, evaluation) for ids in inputs]
            bad = next((o for o in outs if o[0] != 200), None)
            return bad if bad else (200, [o[1] for o in outs])
        return self.generate_one(inputs, params, ret_lp, evaluation)


def make_handler(model: Model):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _json(self, code: int, obj) -> None:
            body = json.dumps(obj, ensure_ascii=False).encode("utf-8")
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _text(self, code: int, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _flush(self) -> None:
            with model.cond:
                running = model.inflight
            self._text(*sglang_control.flush_cache(running))

        def do_GET(self):  # noqa: N802
            url = urlsplit(self.path)
            if url.path in ("/server_info", "/get_server_info"):
                self._json(200, model.server_info())
            elif url.path == "/v1/loads":
                with model.cond:
                    running = model.inflight
                code, body = sglang_control.loads(url.query, running)
                self._json(code, json.loads(body))
            elif url.path == "/flush_cache":
                self._flush()
            elif self.path in ("/health", "/health_generate"):
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif self.path == "/model_info":
                self._json(200, {"model_path": model.model_path, "tokenizer_path": model.model_path,
                                 "is_generation": True})
            else:
                self._json(404, {"detail": "Not Found"})

        def do_POST(self):  # noqa: N802
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if urlsplit(self.path).path == "/flush_cache":
                return self._flush()
            if self.path == "/abort_request":
                if not sglang_control.abort_body_ok(raw):
                    return self._json(422, json.loads(sglang_control.UNPROCESSABLE))
                if json.loads(raw).get("abort_all"):  # by rid: the stand-in keeps no rids, nothing to end
                    model.abort_all()
                return self._text(200, b"")
            if self.path == "/update_weights_from_disk":
                return self._json(*model.update_weights(raw))
            if self.path != "/generate":
                return self._json(404, {"detail": "Not Found"})
            try:
                body = json.loads(raw)
            except ValueError:
                return self._json(400, {"error": {"message": "invalid JSON body"}})
            code, out = model.generate(body if isinstance(body, dict) else {})
            self._json(code, out)

        def log_message(self, fmt, *args):
            pass

    return Handler


def _jit_on_a_cold_cache() -> None:
    """Test-only: FAKE_SGLANG_JIT_DELAY=<s> waits <s> s more unless FlashInfer's JIT cache already
    holds this stand-in's kernels, then writes them there: where flashinfer 0.6.12 keeps them
    (FLASHINFER_WORKSPACE_BASE, else ~; flashinfer/jit/env.py:51-55), so a second start is warm."""
    delay = float(os.environ.get("FAKE_SGLANG_JIT_DELAY", "0") or 0)
    if delay <= 0:
        return
    cache = Path(os.environ.get("FLASHINFER_WORKSPACE_BASE") or Path.home()) / ".cache" / "flashinfer"
    marker = cache / "fake-sglang-jit"
    if marker.is_file():
        return
    wait("FAKE_SGLANG_JIT_DELAY", delay)
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / f".fake-sglang-jit.{os.getpid()}"
    tmp.write_text("compiled\n")
    tmp.replace(marker)


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    model = Model(args)
    # Test-only: FAKE_SGLANG_START_DELAY=<s> waits <s> s before the port binds (weights loaded,
    # CUDA graphs captured, kernels JIT-compiled: /health answers only after them in SGLang too).
    wait("FAKE_SGLANG_START_DELAY", float(os.environ.get("FAKE_SGLANG_START_DELAY", "0") or 0))
    _jit_on_a_cold_cache()
    return serve(args.host or "127.0.0.1", args.port or 30000, make_handler(model),
                 lambda url: f"fake_sglang: tp={args.tp_size or 1} dp={args.dp_size or 1} serving on {url}")


if __name__ == "__main__":
    sys.exit(main())
