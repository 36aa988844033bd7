"""slime's SGLang router (sglang_router, the version slime's environment pins) between the one-job
mode's in-job evaluation and the job's engines: it must pass a request's `rid` on, since the eval
client names each evaluation request with it (pyhelpers/evaluate/episode.py EVAL_RID_PREFIX) and
the stand-in engine draws such a request per task, as the eval server's stand-in does. A router
that dropped it would make the in-job val differ from today's on the stand-ins, and leave SGLang's
logs without the episode's name on a real run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

from fakes.procs import start_fake_sglang, stop
from fakes.shop_fixture import write_shop_fixture
from support.port_claims import claim_port
from support.tokenizer import build_tokenizer

from pyhelpers.evaluate.episode import EVAL_RID_PREFIX


def _up(url: str) -> bool:
    try:
        return urllib.request.urlopen(url + "/health", timeout=1).status == 200
    except OSError:
        return False


def test_slimes_router_passes_an_evaluations_rid_to_the_engine(tmp_path):
    import transformers

    from pyhelpers.policy.prompt_builder import PromptBuilder

    fx = write_shop_fixture(tmp_path / "shop", n_tasks=4, n_eval=2)
    tok = build_tokenizer(tmp_path / "tok")
    engine = start_fake_sglang(tok, policy=fx["policy"], args=["--fake-sampling", "episode"])
    port = claim_port()
    router = subprocess.Popen([sys.executable, "-m", "sglang_router.launch_router", "--worker-urls", engine.url,
                               "--host", "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120  # a bound on a router that never answers, not a wait for it
        while not _up(url):
            assert router.poll() is None and time.monotonic() < deadline, "slime's router did not start"
            time.sleep(0.1)
        ids = PromptBuilder(transformers.AutoTokenizer.from_pretrained(tok)).start(
            instruction=fx["tasks"][0]["instruction"]).token_ids

        def text(**extra) -> str:
            body = {"input_ids": ids, "sampling_params": {"max_new_tokens": 64}, **extra}
            req = urllib.request.Request(url + "/generate", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            return json.loads(urllib.request.urlopen(req, timeout=60).read())["text"]

        evaluation = text(rid=f"{EVAL_RID_PREFIX}val-x/0")
        training = text()
    finally:
        os.killpg(router.pid, signal.SIGTERM)
        router.wait(30)
        stop(engine)
    assert "草稿" in training  # the engine drew this episode on its own: no rid, a training request
    assert "草稿" not in evaluation, f"the router dropped the rid: {evaluation!r}"
