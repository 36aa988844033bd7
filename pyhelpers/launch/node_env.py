"""Per-node environment of a multi-node run (docs/multinode.md "Which address each process uses").

Ray starts every actor of the slime job with the environment of the raylet on the actor's node,
overlaid with the job's runtime env and the actor's own -- and the job's runtime env is the same
on every node. So a value that differs per node must be in the raylet's environment, set where
that node's `ray start` is launched (the head's service here, `make join` on a worker), and must
never be in the job's runtime env, which would override it everywhere:

- SLIME_HOST_IP: slime's get_host_info() returns it before any guess (slime 624b824
  slime/utils/http_utils.py:14,42-46); the RolloutManager binds its SGLang router to it
  (slime/ray/rollout.py:926, router_args.host at :939) and an engine falls back to it for its host
  (slime/backends/sglang_utils/sglang_engine.py:118). Unset, slime guesses by a UDP "connect" to
  the default route, which on a machine with several NICs is often the wrong one.
- NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME: read by NCCL and by torch's Gloo in each training and
  engine process; slime sets neither (slime/ray/actor_group.py:64-71 passes only NCCL_CUMEM_ENABLE,
  NVTE_* and --train-env-vars). NCCL takes a prefix unless the name starts with "=" (NCCL docs,
  NCCL_SOCKET_IFNAME): "=eth0" so that eth0 never also matches eth01. Gloo takes the exact name.
  Interface names differ between machines (eth0 / ens3 / ib0), another reason they are per node.

Proxies: an http_proxy in the environment sends the SGLang router's calls to its engines (a Rust
HTTP client that honours the variables) through the proxy. slime's own clients skip it
(trust_env=False, slime/utils/http_utils.py:225,262), the router does not. The raylets start
without the proxy variables, and the job's runtime env sets each to "" (empty = no proxy for
urllib, httpx, requests and the router alike), since a runtime env can set a variable but not
remove one.
"""

from __future__ import annotations

PROXY_VARS = tuple(v for name in ("http_proxy", "https_proxy", "ftp_proxy", "all_proxy", "no_proxy")
                   for v in (name, name.upper()))
PER_NODE = ("SLIME_HOST_IP", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")


def raylet_env(node_addr: str, iface: str) -> dict[str, str]:
    """What this node's `ray start` gets in its environment: its own address and interface."""
    return {"SLIME_HOST_IP": node_addr, "NCCL_SOCKET_IFNAME": f"={iface}", "GLOO_SOCKET_IFNAME": iface}


def job_env_vars() -> dict[str, str]:
    """Added to the job's runtime env on a multi-node run: every proxy variable emptied."""
    return {v: "" for v in PROXY_VARS}


def of_this_node(cfg) -> dict[str, str]:
    """Added to the environment of this node's `ray start` (head or worker); nothing on one node."""
    return raylet_env(cfg.NODE_ADDR, cfg.NET_IFACE) if cfg.multinode else {}


def dropped(cfg) -> tuple[str, ...]:
    """Taken out of the environment of this node's `ray start`; nothing on one node."""
    return PROXY_VARS if cfg.multinode else ()
