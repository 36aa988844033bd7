"""How outside programs start: slime's command line (slime_args) checked against the flags the
pinned slime/Megatron/SGLang know (slime_flags), the command lines of Ray, ShopSimulator and the
SGLang eval server (ray_start, shopsim_server, sglang_server), the Ray job (rayjob), the long-lived
services in their own process groups (services), the Ray head's ports, token and session pruning
(ray_ports, ray_auth, ray_sessions), and slime's base-model converter (convert_base).
"""
