"""The stand-ins speak the real interfaces: fake SGLang (flags, /health, /generate shape, a policy
that is a pure function of its inputs) and fake ShopSimulator (pack_api's protocol details)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from conftest import FAKES
from fakes.procs import _post, start_fake_sglang, start_fake_shopsim, stop
from fakes.shop_fixture import write_shop_fixture
from support.rehearsal import wait_for
from support.tokenizer import build_tokenizer

from pyhelpers.policy.prompt_builder import PromptBuilder, Transcript
from pyhelpers.policy.sglang_client import SGLangClient, SGLangRejected, parse_generate
from pyhelpers.shopsim import actions, protocol
from pyhelpers.shopsim.client import ShopSimClient
from pyhelpers.tasks import build

pytestmark = pytest.mark.heavy  # the stand-in servers as processes


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    import transformers

    d = tmp_path_factory.mktemp("world")
    fx = write_shop_fixture(d / "shop", n_tasks=8, n_eval=4,
                            effects=[{"skill": "good", "delta": 1.0}, {"text": "乱买一通", "delta": -1.0}])
    tok_dir = build_tokenizer(d / "tok")
    shop = start_fake_shopsim(fx["server_file"], slots=8, seed=3, retries=2, delay=0.05)
    sg = start_fake_sglang(tok_dir, policy=fx["policy"], seed=5, context_length=6000)
    yield {"fx": fx, "tok_dir": tok_dir, "tok": transformers.AutoTokenizer.from_pretrained(tok_dir),
           "shop": shop, "sg": sg}
    stop(shop)
    stop(sg)


def _launch(args, tok_dir):
    return subprocess.run([sys.executable, str(FAKES / "fake_sglang.py"), "--model-path", str(tok_dir),
                           "--port", "0", *args], capture_output=True, text=True, timeout=20)


def test_fake_sglang_rejects_unknown_flags_like_argparse(world):
    r = _launch(["--no-such-flag", "1"], world["tok_dir"])
    assert r.returncode == 2 and "unrecognized arguments: --no-such-flag" in r.stderr
    r = subprocess.run([sys.executable, str(FAKES / "fake_sglang.py"), "--port", "1"], capture_output=True,
                       text=True, timeout=20)
    assert r.returncode == 2 and "--model-path" in r.stderr


def test_fake_sglang_accepts_real_flags(world, tmp_path):
    # --tp / --dp are argparse abbreviations of --tp-size / --dp-size, as on the real server.
    sg = start_fake_sglang(world["tok_dir"], args=["--tp", "1", "--trust-remote-code", "--mem-fraction-static",
                                                   "0.8", "--skip-server-warmup", "--log-level", "warning"])
    try:
        with urllib.request.urlopen(sg.url + "/model_info", timeout=5) as resp:
            assert json.loads(resp.read())["is_generation"] is True
    finally:
        stop(sg)


def _generate(url, body):
    req = urllib.request.Request(url + "/generate", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def test_generate_shape_and_determinism(world):
    b = PromptBuilder(world["tok"])
    t0, t1 = world["fx"]["tasks"][0], world["fx"]["tasks"][1]
    ids0 = b.start(instruction=t0["instruction"]).token_ids
    ids1 = b.start(instruction=t1["instruction"]).token_ids
    body = {"sampling_params": {"max_new_tokens": 64, "temperature": 1.0}, "return_logprob": True}
    a = _generate(world["sg"].url, {**body, "input_ids": ids0})
    _generate(world["sg"].url, {**body, "input_ids": ids1})
    again = _generate(world["sg"].url, {**body, "input_ids": ids0})
    assert a == again  # same inputs, same answer, whatever came in between
    meta = a["meta_info"]
    assert meta["finish_reason"]["type"] == "stop" and meta["prompt_tokens"] == len(ids0)
    assert [x[1] for x in meta["output_token_logprobs"]] == a["output_ids"] and meta["completion_tokens"] == len(a["output_ids"])
    assert all(x[2] is None and x[0] <= 0 for x in meta["output_token_logprobs"])
    res = parse_generate(a)
    assert actions.extract_action(res.text) == actions.Action("search", t0["query"].lower())
    short = parse_generate(_generate(world["sg"].url, {**body, "input_ids": ids0,
                                                       "sampling_params": {"max_new_tokens": 3}}))
    assert short.truncated and len(short.output_ids) == 3 and short.output_ids == res.output_ids[:3]

    async def over_budget():
        async with SGLangClient(world["sg"].url) as c:
            assert await c.health()
            with pytest.raises(SGLangRejected, match="maximum context length"):
                await c.generate(ids0, {"max_new_tokens": 6000})
            with pytest.raises(ValueError):
                await c.generate(ids0, {})
    asyncio.run(over_budget())


def test_fake_sglang_takes_exactly_what_the_real_scheduler_takes(world):
    """SGLang 0.5.15.post1 with --context-length L: a prompt of L - 6 tokens or more is aborted with
    HTTP 400 (tp_worker.py:455-465, managers/utils.py:177-192), prompt + max_new_tokens == L is
    accepted (tokenizer_manager.py:973-997) and generation stops at L - 2 - prompt tokens
    (scheduler.py:1905-1916); the prompt builder's budget asks for exactly that much."""
    L = 6000
    tok = world["tok"]
    tr = PromptBuilder(tok).start(instruction=world["fx"]["tasks"][0]["instruction"])
    ids0 = tr.token_ids
    pad = tok.encode(" ", add_special_tokens=False)[0]

    def prompt(n):
        return ids0 + [pad] * (n - len(ids0))

    refused = _generate_status(world["sg"].url, {"input_ids": prompt(L - 6), "sampling_params": {"max_new_tokens": 1}})
    assert refused[0] == 400 and "Input length (5994 tokens) exceeds the maximum allowed length (5994 tokens)" \
        in refused[1]["error"]["message"]
    code, out = _generate_status(world["sg"].url, {"input_ids": prompt(L - 7), "sampling_params": {"max_new_tokens": 7}})
    assert code == 200 and len(out["output_ids"]) == 5
    assert out["meta_info"]["finish_reason"] == {"type": "length", "length": 5}
    long = prompt(L - 7)
    budget = PromptBuilder.max_new_tokens(Transcript(prompt_len=len(long), token_ids=long), L, 4096)
    code, out = _generate_status(world["sg"].url, {"input_ids": long, "sampling_params": {"max_new_tokens": budget}})
    assert code == 200 and len(out["output_ids"]) == budget  # what the budget asked for, not less


def _generate_status(url, body):
    req = urllib.request.Request(url + "/generate", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_generate_text_keeps_the_stop_token_under_slimes_sampling_params(world):
    """SGLang trims the matched stop token from `text` unless no_stop_trim (sglang
    detokenizer_manager.py:171-200) and drops special tokens unless skip_special_tokens=False
    (sampling_params.py:107-109): slime sends both the other way, so its `text` ends in EOS."""
    b = PromptBuilder(world["tok"])
    ids = b.start(instruction=world["fx"]["tasks"][0]["instruction"]).token_ids
    body = {"input_ids": ids, "return_logprob": True}
    slime = _generate(world["sg"].url, {**body, "sampling_params": {
        "max_new_tokens": 64, "skip_special_tokens": False, "no_stop_trim": True}})
    plain = _generate(world["sg"].url, {**body, "sampling_params": {"max_new_tokens": 64}})
    eos = world["tok"].convert_tokens_to_ids("<|im_end|>")
    assert slime["meta_info"]["finish_reason"] == {"type": "stop", "matched": eos}
    assert slime["output_ids"] == plain["output_ids"] and slime["output_ids"][-1] == eos
    assert slime["text"] == plain["text"] + "<|im_end|>"
    assert "<|im_end|>" not in plain["text"]


async def _play(world, task, skills_block, max_turns=8):
    b = PromptBuilder(world["tok"])
    async with ShopSimClient(world["shop"].url) as shop, SGLangClient(world["sg"].url) as sg:
        async with shop.episode_slot(task["idx"]) as slot:
            tr = b.start(instruction=protocol.goal_instruction(slot.reset.instruction), skills_block=skills_block)
            step = None
            for _ in range(max_turns):
                g = await sg.generate(tr.token_ids, {"max_new_tokens": b.max_new_tokens(tr, 6000, 256)})
                b.add_response(tr, g.output_ids, g.logprobs, g.text)
                step = await slot.interact(g.text)
                if step.over:
                    break
                b.add_observation(tr, step.observation)
            return step, tr


def test_planted_skills_decide_the_outcome(world):
    tasks = world["fx"]["tasks"]

    async def go():
        helpful = [await _play(world, t, "[S-good] 先选规格") for t in tasks]
        harmful = [await _play(world, t, "[S-bad] 乱买一通") for t in tasks]
        return helpful, harmful
    helpful, harmful = asyncio.run(go())
    assert all(s.done and s.scores.success for s, _ in helpful)
    assert not any(s is not None and s.scores.success for s, _ in harmful)
    assert all(tr.turns == 4 for _, tr in helpful)


def test_fake_shopsim_protocol_details(world):
    url = world["shop"].url + "/api/shop_agent"
    assert _post(url, {"action": "release_one"})["result"] == {"error": protocol.PROBE_ERROR}
    assert _post(url, {"action": "release_one", "env_idx": 7})["result"]["message"].endswith("already free")
    r = _post(url, {"action": "reset", "idx": 1})["result"]
    e = r["env_idx"]
    task = world["fx"]["tasks"][1]
    # No "\nAction: " -> the whole text is parsed: "Action: search[..]" is no action at all.
    step = _post(url, {"action": "interact", "env_idx": e, "response": f"Action: search[{task['query']}]"})["result"]
    assert not step["done"] and "搜索功能是否可用: True" in step["instruction"]
    step = _post(url, {"action": "interact", "env_idx": e, "response": f"T\nAction: search[{task['query']}]"})["result"]
    assert task["asin"] in actions.clickables(step["instruction"])
    same = _post(url, {"action": "interact", "env_idx": e, "response": "T\nAction: click[not a button]"})["result"]
    assert same["instruction"] == step["instruction"]  # silent no-op
    bad = _post(url, {"action": "dance", "env_idx": e})["result"]
    assert bad["error"].startswith("Unknown action type")
    assert _post(url, {"action": "release_one", "env_idx": e})["result"]["message"].endswith("released")


def _raw_post(url: str, body: bytes, ctype: str | None) -> tuple[int, str, str]:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": ctype} if ctype else {})
    if ctype is None:
        req.remove_header("Content-type")  # urllib adds a form type by default
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode()


@pytest.mark.parametrize("body, ctype, status, shows", [
    # Werkzeug 2.1.2 request.py:569-571,611-614 + Flask 2.1.2 wrappers.py:126-133 (the fork's pins)
    (b"{}", "text/plain", 400, "<title>400 Bad Request</title>"),
    (b'{"action": "release_one"}', None, 400, "<title>400 Bad Request</title>"),
    (b'{"action": "release_one"}', "text/json", 400, "<title>400 Bad Request</title>"),
    (b"{", "application/json", 400, "<title>400 Bad Request</title>"),
    (b"", "application/json", 400, "<title>400 Bad Request</title>"),
    # pack_api.py:66 `data.get` on a list/string/number, outside its try: Flask's 500 page
    (b"[1, 2]", "application/json", 500, "<title>500 Internal Server Error</title>"),
    (b'"reset"', "application/json", 500, "<title>500 Internal Server Error</title>"),
    (b"7", "application/json", 500, "<title>500 Internal Server Error</title>"),
    # pack_api.py:61-64: JSON null is "No JSON data provided" (HTTP 200, as every pack_api answer)
    (b"null", "application/json", 200, '{"result": {"error": "No JSON data provided"}}'),
    (b'{"action": "release_one"}', "application/json; charset=utf-8", 200, "No valid environment index provided"),
    (b'{"action": "release_one"}', "application/vnd.shop+json", 200, "No valid environment index provided"),
])
def test_fake_shopsim_answers_a_bad_body_as_flask_does(world, body, ctype, status, shows):
    code, got_type, text = _raw_post(world["shop"].url + protocol.API_PATH, body, ctype)
    assert (code, shows in text) == (status, True), text
    assert got_type.startswith("text/html" if status != 200 else "application/json")


def test_fake_shopsim_over_after_history_and_prices_fixed_by_seed(world, tmp_path):
    fx = world["fx"]
    a = start_fake_shopsim(fx["server_file"], slots=1, seed=11, args=["--max-history", "4"])
    b = start_fake_shopsim(fx["server_file"], slots=1, seed=11)
    c = start_fake_shopsim(fx["server_file"], slots=1, seed=12)
    try:
        url = a.url + "/api/shop_agent"
        e = _post(url, {"action": "reset", "idx": 0})["result"]["env_idx"]
        overs = [_post(url, {"action": "interact", "env_idx": e, "response": "noop"})["result"]["over"]
                 for _ in range(3)]
        assert overs == [False, False, True]  # 2 + 3 messages > 4: over, slot freed by the server
        assert _post(url, {"action": "release_one"})["result"]["error"] == protocol.PROBE_ERROR
        assert _post(url, {"action": "reset", "idx": 0})["result"]["env_idx"] == e

        def price(proc, idx):  # partner products have a price range: drawn from the seed
            t = fx["tasks"][idx]
            u = proc.url + "/api/shop_agent"
            env = _post(u, {"action": "reset", "idx": idx})["result"]["env_idx"]
            for act in (f"search[{t['query']}]", f"click[{t['asin']}]", "click[buy now]"):
                res = _post(u, {"action": "interact", "env_idx": env, "response": "T\nAction: " + act})["result"]
            return res["purchase"]["price"]
        assert price(b, 1) == price(b, 1) and price(b, 1) != price(c, 1)
    finally:
        for proc in (a, b, c):
            stop(proc)


def test_built_task_indices_match_the_fake_server(world, tmp_path):
    fx = write_shop_fixture(tmp_path / "q", quirks=True)
    res = build.build([tmp_path / "q"])
    shop = start_fake_shopsim(fx["server_file"], slots=2)

    async def go():
        async with ShopSimClient(shop.url) as c:
            for t in res.train + res.val:
                async with c.episode_slot(t["shopsim_idx"]) as slot:
                    assert protocol.goal_instruction(slot.reset.instruction) == t["instruction"], t
                    assert slot.reset.goal_options == t["goal_options"]
    try:
        asyncio.run(go())
    finally:
        stop(shop)


def test_the_slime_stand_in_keeps_no_scratch_once_its_engine_answers(tmp_path):
    """The fault tests SIGKILL the slime stand-in while its engines run, so what it keeps in the temp
    dir until its own clean exit outlives it (169 fake-slime-* dirs had piled up in /tmp)."""
    model = build_tokenizer(tmp_path / "model")
    temp = tmp_path / "temp"
    temp.mkdir()
    code = (f"import os, sys; sys.path.insert(0, {str(FAKES / 'slime_stub')!r})\n"
            "from argparse import Namespace\n"
            "import train\n"
            f"args = Namespace(hf_checkpoint={str(model)!r}, sglang_context_length=4096)\n"
            "train.start_engines(args, None)\n"
            "try:\n"
            f"    print(sorted(os.listdir({str(temp)!r})))\n"
            "finally:\n"
            "    train.stop_engines()\n")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TMPDIR": str(temp)},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout


def test_an_evaluations_request_is_drawn_per_task_on_a_training_engine_too(world, tmp_path):
    """The one-job mode plays val on the job's engines: a request the eval client names (rid
    `shopsimrl-eval/...`) is drawn per task there as on the eval server, while a training request
    (no rid) draws on its own episode (the first response names the draw)."""
    from pyhelpers.evaluate.episode import EVAL_RID_PREFIX

    engine = start_fake_sglang(world["tok_dir"], policy=world["fx"]["policy"], seed=5, context_length=6000,
                               args=["--fake-sampling", "episode"])
    try:
        b = PromptBuilder(world["tok"])
        ids = b.start(instruction=world["fx"]["tasks"][0]["instruction"]).token_ids
        body = {"input_ids": ids, "sampling_params": {"max_new_tokens": 64, "temperature": 1.0}}
        evals = [_generate(u, {**body, "rid": f"{EVAL_RID_PREFIX}val-t0/{n}"})["text"]
                 for u in (engine.url, world["sg"].url) for n in range(2)]
        trains = [_generate(engine.url, body)["text"] for _ in range(2)]
    finally:
        stop(engine)
    assert len(set(evals)) == 1 and "草稿" not in evals[0], evals
    assert all("草稿 #n" in t for t in trains) and trains[0] != trains[1], trains


def test_a_rid_still_in_flight_is_refused_as_sglang_refuses_it(world):
    """tokenizer_manager.py:2886-2887 (sglang 0.5.15.post1): a second request with the rid of one still
    generating is a ValueError, HTTP 400; once the first is done the rid is free again; a batch that
    names one rid twice is refused too (io_struct.py:316-322)."""
    import threading

    engine = start_fake_sglang(world["tok_dir"], policy=world["fx"]["policy"], seed=5, context_length=6000,
                               latency_ms=60_000)
    b = PromptBuilder(world["tok"])
    ids = b.start(instruction=world["fx"]["tasks"][0]["instruction"]).token_ids
    body = {"input_ids": ids, "sampling_params": {"max_new_tokens": 8}, "rid": "same"}
    first: list = []
    t = threading.Thread(target=lambda: first.append(_generate_status(engine.url, body)), daemon=True)
    try:
        t.start()
        wait_for("the first request in flight", lambda: json.loads(urllib.request.urlopen(
            engine.url + "/v1/loads", timeout=5).read())["loads"][0]["num_running_reqs"] == 1, timeout=60)
        code, err = _generate_status(engine.url, body)
        assert code == 400 and err["error"]["message"] == "Duplicate request ID detected: same"
        code, err = _generate_status(engine.url, {**body, "input_ids": [ids, ids], "rid": ["a", "a"]})
        assert code == 400 and "Duplicate request IDs detected within the request" in err["error"]["message"]
    finally:
        urllib.request.urlopen(urllib.request.Request(engine.url + "/abort_request", data=b'{"abort_all": true}',
                                                      headers={"Content-Type": "application/json"}), timeout=5)
        t.join(30)
        stop(engine)
    assert first and first[0][0] == 200 and first[0][1]["meta_info"]["finish_reason"]["type"] == "abort"


def test_the_eval_client_names_each_try_of_a_request_with_a_fresh_rid():
    """A /generate sent again after a 504 (the router gave up, the engine may still be generating
    the first) carries a rid of its own: SGLang would refuse the first's as a duplicate. Both name
    the episode."""
    import httpx

    seen: list = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content)["rid"])
        if len(seen) == 1:
            return httpx.Response(504, text="gateway timeout")
        return httpx.Response(200, json={"text": "x", "output_ids": [7], "meta_info": {
            "finish_reason": {"type": "stop"}, "prompt_tokens": 1, "completion_tokens": 1,
            "output_token_logprobs": [[-0.1, 7, None]]}})

    async def main():
        async with SGLangClient("http://127.0.0.1:9", transport=httpx.MockTransport(answer), retry_delay=0) as c:
            return await c.generate([1], {"max_new_tokens": 4}, rid="shopsimrl-eval/val-t1")

    assert asyncio.run(main()).output_ids == [7]
    assert len(seen) == 2 and seen[0] != seen[1] and all(r.startswith("shopsimrl-eval/val-t1/") for r in seen)
