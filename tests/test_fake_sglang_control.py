"""The SGLang stand-in answers slime's control calls in SGLang 0.5.15.post1's shapes and status codes
(tests/support/sglang_shapes.py holds the real answers, read from its source): /server_info and
/get_server_info (slime external.py:74-118, sglang_engine.py:157-169 at 624b824), /abort_request and
/v1/loads (slime server_control.py:32-40), /flush_cache (slime sglang_engine.py:270-289)."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import pytest
from fakes.procs import start_fake_sglang, stop
from support import sglang_shapes
from support.tokenizer import build_tokenizer

pytestmark = pytest.mark.heavy  # a stand-in server as a process


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    return build_tokenizer(tmp_path_factory.mktemp("ctl") / "tok")


def _call(url: str, method: str = "GET", body: bytes | None = None) -> tuple[int, bytes, str]:
    req = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers.get("Content-Type", "")


@pytest.mark.parametrize("path", ["/server_info", "/get_server_info"])
def test_server_info_has_the_fields_slime_reads_with_sglangs_types(tok_dir, path):
    sg = start_fake_sglang(tok_dir, args=["--pp-size", "1", "--enable-memory-saver"])
    try:
        code, raw, _ = _call(sg.url + path)
    finally:
        stop(sg)
    assert code == 200, raw
    info = json.loads(raw)
    for name, (kind, _default) in sglang_shapes.SERVER_INFO_FIELDS.items():
        assert isinstance(info.get(name), kind) and (kind is bool or not isinstance(info[name], bool)), (name, info)
    for name, kind in sglang_shapes.SERVER_INFO_EXTRA_KEYS.items():
        assert isinstance(info.get(name), kind), (name, info)
    assert "num_gpus" not in info  # not a ServerArgs field: slime must fall back to tp_size * pp_size
    assert info["version"] == sglang_shapes.SGLANG_VERSION
    assert (info["tp_size"], info["pp_size"], info["dp_size"]) == (1, 1, 1)
    assert info["enable_memory_saver"] is True  # the flag given: slime compares it with --offload-rollout
    assert info["disaggregation_mode"] in sglang_shapes.DISAGGREGATION_MODES


def test_server_info_defaults_are_sglangs(tok_dir):
    sg = start_fake_sglang(tok_dir)
    try:
        info = json.loads(_call(sg.url + "/server_info")[1])
    finally:
        stop(sg)
    for name, (_kind, default) in sglang_shapes.SERVER_INFO_FIELDS.items():
        if default is not None:
            assert info[name] == default, name


def _loads(url: str) -> dict:
    code, raw, _ = _call(url + "/v1/loads?include=core")
    assert code == 200, raw
    return json.loads(raw)


def test_abort_loads_and_flush_in_sglangs_shapes(tok_dir):
    sg = start_fake_sglang(tok_dir, latency_ms=600_000)  # a request stays in flight until aborted
    answers = []
    body = json.dumps({"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 8}}).encode()
    t = threading.Thread(target=lambda: answers.append(_call(sg.url + "/generate", "POST", body)))
    try:
        idle = _loads(sg.url)
        assert set(idle) == sglang_shapes.LOADS_TOP_KEYS and idle["version"] == sglang_shapes.SGLANG_VERSION
        assert {frozenset(load) for load in idle["loads"]} == {frozenset(sglang_shapes.LOAD_CORE_KEYS)}
        code, raw, _ = _call(sg.url + "/flush_cache")
        assert code == 200 and raw.decode().startswith(sglang_shapes.FLUSH_OK_PREFIX)
        t.start()
        while sum(load["num_running_reqs"] for load in _loads(sg.url)["loads"]) < 1:  # the request arrived
            assert t.is_alive() and sg.proc.poll() is None
            time.sleep(0.05)
        for method in ("GET", "POST"):
            assert _call(sg.url + "/flush_cache", method)[0] == sglang_shapes.FLUSH_BUSY_STATUS
        code, raw, _ = _call(sg.url + "/abort_request", "POST", json.dumps({"abort_all": True}).encode())
        assert (code, raw) == sglang_shapes.ABORT_OK
        t.join(30)
        assert not t.is_alive()
        code, raw, _ = answers[0]
        assert code == 200 and json.loads(raw)["meta_info"]["finish_reason"]["type"] == "abort"
        assert sum(load["num_running_reqs"] for load in _loads(sg.url)["loads"]) == 0
        assert _call(sg.url + "/flush_cache", "POST")[0] == 200
        assert _call(sg.url + "/v1/loads?include=nonsense")[0] == 400
        assert _call(sg.url + "/abort_request", "POST", b"not json")[0] == 422  # FastAPI's body validation
    finally:
        stop(sg)
        if t.ident:
            t.join(5)
