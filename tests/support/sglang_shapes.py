"""What SGLang 0.5.15.post1 answers on the control endpoints slime's real code calls, read from its
wheel (sglang-0.5.15.post1-cp311-cp311-manylinux_2_34_x86_64.whl), for the stand-ins' shape tests.

Facts only (never the stand-ins' own code): a stand-in that drifts from these fails its test.

- GET /server_info (http_server.py:705-727) answers 200 with `dataclasses.asdict(server_args)`
  merged with scheduler_info, "internal_states" (a list, one per DP rank), "version" and
  "kv_events"; GET /get_server_info (http_server.py:695-702) answers the same, deprecated.
  ServerArgs' fields slime reads (server_args.py, the default after '='):
  tp_size int (816), pp_size int (830), dp_size int (842), ep_size int (1765),
  disaggregation_mode "null"|"prefill"|"decode" = "null" (2273-2283),
  disaggregation_bootstrap_port int = 8998 (2284-2287), encoder_only bool = False (2320-2323),
  enable_memory_saver bool = False (2581-2584). ServerArgs has no `num_gpus`: slime falls back to
  tp_size * pp_size (slime external.py:103-105 at 624b824).
- POST /abort_request (http_server.py:1499-1509) takes AbortReq (io_struct.py:1737-1747: rid,
  abort_all, ...) and answers 200 with an empty body.
- GET /v1/loads (v1_loads.py:78-140) answers 200 {"timestamp": ISO text, "version", "loads": [..]};
  with include=core each load is exactly the core dict of load_snapshot.py:292-305; an include
  section outside VALID_SECTIONS (load_snapshot.py:288-290) is a ValueError (load_snapshot.py:310-314).
- GET|POST /flush_cache (http_server.py:862-877) answers 200 "Cache flushed.\\n..." text when idle,
  400 with the scheduler's message while requests run or wait.
"""

from __future__ import annotations

SGLANG_VERSION = "0.5.15.post1"

# ServerArgs field -> (type, default) for the fields slime's external-engine path reads.
SERVER_INFO_FIELDS = {
    "tp_size": (int, None),
    "pp_size": (int, None),
    "dp_size": (int, None),
    "ep_size": (int, None),
    "disaggregation_mode": (str, "null"),
    "disaggregation_bootstrap_port": (int, 8998),
    "encoder_only": (bool, False),
    "enable_memory_saver": (bool, False),
}
SERVER_INFO_EXTRA_KEYS = {"internal_states": list, "version": str}  # besides asdict(server_args)
DISAGGREGATION_MODES = ("null", "prefill", "decode")

LOADS_TOP_KEYS = {"timestamp", "version", "loads"}
LOAD_CORE_KEYS = {"dp_rank", "num_running_reqs", "num_waiting_reqs", "num_waiting_uncached_tokens",
                  "num_used_tokens", "num_total_tokens", "max_total_num_tokens", "max_running_requests",
                  "token_usage", "gen_throughput", "cache_hit_rate", "utilization"}

ABORT_OK = (200, b"")
FLUSH_OK_PREFIX = "Cache flushed."
FLUSH_BUSY_STATUS = 400
