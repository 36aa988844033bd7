"""SGLang 0.5.15.post1's answers to the control calls slime makes on every engine, shared by the
engine stand-in (fake_sglang.py) and the router stand-in (fake_router.py, its own "worker").

- /v1/loads (sglang/srt/entrypoints/v1_loads.py:78-140; the core dict: managers/load_snapshot.py:
  292-305, an unknown include section a ValueError there, 310-314, answered 400 here);
- /flush_cache (http_server.py:862-877): 200 with SGLang's text when idle, 400 while busy;
- /abort_request (http_server.py:1499-1509): AbortReq's body (io_struct.py:1737-1747), 200 and an
  empty body; a body FastAPI cannot read as AbortReq is its 422.
Stdlib only.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

SGLANG_VERSION = "0.5.15.post1"
LOAD_SECTIONS = {"core", "memory", "spec", "lora", "disagg", "queues", "all"}
FLUSHED = (b"Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
           b"requests, the operation will not be performed.)\n")


def loads(query: str, running: int, waiting: int = 0) -> tuple[int, bytes]:
    """GET /v1/loads?<query>: one DP rank's core metrics (the stand-ins have no other section)."""
    from urllib.parse import parse_qs

    include = {s.strip() for v in parse_qs(query).get("include", []) for s in v.split(",")}
    if include - LOAD_SECTIONS:
        detail = (f"Invalid include sections: {include - LOAD_SECTIONS}. Valid options: {sorted(LOAD_SECTIONS)}")
        return 400, json.dumps({"detail": detail}).encode()
    load = {"dp_rank": 0, "num_running_reqs": running, "num_waiting_reqs": waiting,
            "num_waiting_uncached_tokens": 0, "num_used_tokens": 0, "num_total_tokens": 0,
            "max_total_num_tokens": 0, "max_running_requests": 0, "token_usage": 0.0, "gen_throughput": 0.0,
            "cache_hit_rate": 0.0, "utilization": 0.0}
    body = {"timestamp": datetime.now(timezone.utc).isoformat(), "version": SGLANG_VERSION, "loads": [load]}
    return 200, json.dumps(body).encode()


def flush_cache(running: int, waiting: int = 0) -> tuple[int, bytes]:
    if running or waiting:
        return 400, (f"Cache not flushed because there are pending requests. #queue-req: {waiting}, "
                     f"#running-req: {running}").encode()
    return 200, FLUSHED


def abort_body_ok(raw: bytes) -> bool:
    """Whether FastAPI reads the body as AbortReq (a JSON object; else its 422)."""
    try:
        return isinstance(json.loads(raw or b"null"), dict)
    except ValueError:
        return False


UNPROCESSABLE = json.dumps({"detail": [{"type": "model_attributes_type", "loc": ["body"],
                                        "msg": "Input should be a valid dictionary or object"}]}).encode()
