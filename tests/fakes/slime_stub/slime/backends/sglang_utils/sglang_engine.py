"""slime.backends.sglang_utils.sglang_engine (624b824), the engine calls slime makes between
rollout and training under --colocate (train.py:55-56 -> RolloutManager.offload, slime/ray/rollout.py
:536-539 -> SGLangEngine.release_memory_occupation, sglang_engine.py:328-330):
flush_cache (:270-289: GET /flush_cache until 200, 60 tries 1 s apart, then TimeoutError), then
POST /release_memory_occupation, which SGLang answers only when idle (its scheduler asserts it,
sglang weight_updater.py:184-187; the engine dies otherwise); resume_memory_occupation before the
next rollout. Differs: the stand-in waits 0.05 s between flush tries (FAKE_SLIME_FLUSH_INTERVAL),
not 1 s, so a request still in flight 3 s after the rollout returned fails it, where slime waits
60 s; the engine is a URL, not a Ray actor."""

import os
import time
import urllib.error
import urllib.request


class EngineError(RuntimeError):
    """What the Ray actor call raises in slime when the engine fails: the job fails."""


def _call(url: str, method: str = "POST", body: bytes = b"{}") -> tuple[int, str]:
    req = urllib.request.Request(url, data=body if method == "POST" else None, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


class SGLangEngine:
    def __init__(self, url: str):
        self.url = url.rstrip("/")

    def flush_cache(self) -> None:
        interval = float(os.environ.get("FAKE_SLIME_FLUSH_INTERVAL", "0.05"))
        text = ""
        for _ in range(60):
            try:
                code, text = _call(self.url + "/flush_cache", "GET")
            except OSError as exc:
                code, text = 0, str(exc)
            if code == 200:
                return
            time.sleep(interval)
        raise EngineError(f"TimeoutError: Timeout while flushing cache. (last answer: {text[:200]})")

    def release_memory_occupation(self) -> None:
        self.flush_cache()
        code, text = _call(self.url + "/release_memory_occupation")
        if code != 200:
            raise EngineError(f"release_memory_occupation failed: HTTP {code} {text[:300]}")

    def resume_memory_occupation(self, tags=None) -> None:
        code, text = _call(self.url + "/resume_memory_occupation")
        if code != 200:
            raise EngineError(f"resume_memory_occupation failed: HTTP {code} {text[:300]}")
