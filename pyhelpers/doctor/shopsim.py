"""ShopSimulator (M6) and exposure (architecture §5): the checkout is there, its port is free, and
which ports the run opens on which addresses."""

from __future__ import annotations

from pyhelpers.config import ray_ports
from pyhelpers.config.check import is_loopback
from pyhelpers.doctor.base import FAIL, PASS, WARN, Context, Result, result
from pyhelpers.procs import groups, ports
from pyhelpers.run import layout


def _ours(ctx: Context) -> set[int]:
    """Pids of this run's own live services: a port they hold is not a conflict (`make resume`
    stops them first; a second `make train` is refused by the run lock, naming the driver)."""
    return groups.live_pids(layout.from_config(ctx.cfg).pids)


def _held_by_us(port: int, ours: set[int]) -> bool:
    holders = ports.who_holds_port(port)
    return bool(holders) and all(h.pid in ours for h in holders)


PACK_API = "shop_env/shop_env/pack_api.py"


def check_shopsim(ctx: Context) -> list[Result]:
    out = []
    api = ctx.cfg.SHOPSIM_DIR / PACK_API
    if api.is_file():
        out.append(result("shopsim-dir", PASS, f"{api}"))
    else:
        out.append(result("shopsim-dir", FAIL, f"{api} is missing (SHOPSIM_DIR={ctx.cfg.SHOPSIM_DIR})",
                          fix="clone ShopAgent-Team/ShopSimulator into SHOPSIM_DIR (or copy it from the old machine), "
                          "or set SHOPSIM_DIR to the checkout"))
    out.append(_reset_retries(ctx))
    host, port = ctx.cfg.SHOPSIM_HOST, ctx.cfg.SHOPSIM_PORT
    if ports.port_free(host, port):
        out.append(result("shopsim-port", PASS, f"{host}:{port} is free (SHOPSIM_PORT)"))
    elif _held_by_us(port, _ours(ctx)):
        out.append(result("shopsim-port", PASS, f"{host}:{port} is held by this run's own ShopSimulator "
                          "(make resume stops it first)"))
    else:
        held = ports.describe_holders(port, ports.who_holds_port(port))
        out.append(result("shopsim-port", FAIL, f"{host}:{port}: {held}",
                          fix="if it is a simulator left from an earlier run: `make stop`; otherwise stop that "
                          "process or set SHOPSIM_PORT to a free port"))
    return out


# pack_api.py:23-24 at the fork's 1487f67: constants, read by no environment variable.
UPSTREAM_RETRIES, UPSTREAM_DELAY_S = 5, 5.0


def _reset_retries(ctx: Context) -> Result:
    """SHOPSIM_RESET_RETRIES/DELAY act only through the project's launcher, which overwrites
    pack_api's MAX_RETRIES/RETRY_DELAY_SECONDS; a custom SHOPSIM_LAUNCHER running upstream's server
    keeps its constants, so other values would only make the user believe them."""
    retries, delay = ctx.cfg.SHOPSIM_RESET_RETRIES, ctx.cfg.SHOPSIM_RESET_DELAY
    knobs = f"SHOPSIM_RESET_RETRIES={ctx.cfg.SHOPSIM_RESET_RETRIES}, SHOPSIM_RESET_DELAY={ctx.cfg.SHOPSIM_RESET_DELAY:g}"
    if not ctx.cfg.SHOPSIM_LAUNCHER:
        return result("shopsim-retries", PASS, f"{knobs}: set in pack_api by the project's launcher")
    if (retries, delay) == (UPSTREAM_RETRIES, UPSTREAM_DELAY_S):
        return result("shopsim-retries", PASS, f"{knobs}: the same as upstream pack_api's constants")
    return result("shopsim-retries", WARN,
                  f"{knobs} take effect only through the project's launcher: upstream's pack_api waits "
                  f"{UPSTREAM_RETRIES} x {UPSTREAM_DELAY_S:g} s for a free slot whatever they say (MAX_RETRIES, "
                  "RETRY_DELAY_SECONDS, pack_api.py:23-24)",
                  fix="make SHOPSIM_LAUNCHER set pack_api.MAX_RETRIES/RETRY_DELAY_SECONDS from those two variables "
                  "(it gets both in its environment), leave SHOPSIM_LAUNCHER empty, or set them to 5 and 5")


def check_exposure(ctx: Context) -> list[Result]:
    cfg = ctx.cfg
    opened = [
        ("ShopSimulator", cfg.SHOPSIM_HOST, "SHOPSIM_PORT"),
        ("SGLang eval server", "127.0.0.1", "EVAL_PORT"),
    ]
    lines, held, public = [], [], []
    ours = _ours(ctx)
    for what, host, knob in opened:
        port = cfg.int(knob)
        state = "free"
        if not ports.port_free("127.0.0.1" if host == "0.0.0.0" else host, port):
            if _held_by_us(port, ours):
                state = f"held by this run's {what}"
            else:
                state = ports.describe_holders(port, ports.who_holds_port(port))
                if knob != "SHOPSIM_PORT":  # a foreign holder of SHOPSIM_PORT fails shopsim-port already
                    held.append(f"{knob}={port}")
        lines.append(f"{what}: {host}:{port} ({knob}) {state}")
        if knob == "SHOPSIM_PORT" and not is_loopback(host):
            public.append(f"SHOPSIM_HOST={host}")
    base = cfg.RAY_PORT
    ray_line = (f"Ray: dashboard + job API 127.0.0.1:{cfg.RAY_DASHBOARD_PORT}, GCS and the rest 127.0.0.1:"
                f"{base}-{base + ray_ports.SPAN - 1} (RAY_PORT), workers on kernel-chosen loopback ports; every "
                "call needs the run's token (ray-ports above checks these ports)")
    lines.append(ray_line)
    lines.append("slime's rollout engines (SGLang, inside the Ray job) pick their own ports on this host")
    found = (f"the run opens {', '.join(f'{h}:{cfg[k]}' for _, h, k in opened)}; Ray's ports are all on "
             "127.0.0.1 and require the run's token (ShadowRay, CVE-2023-48022)")
    if public:
        return [result("exposure", WARN, f"{', '.join(public)} exposes ShopSimulator to the network "
                       "(SHOPSIM_EXPOSE_TO_NETWORK=1); " + found,
                       fix="unless that is meant, set SHOPSIM_HOST=127.0.0.1 and SHOPSIM_EXPOSE_TO_NETWORK=0", details=lines)]
    if held:
        return [result("exposure", WARN, f"{', '.join(held)} already in use; " + found,
                       fix="stop what holds them (a leftover run: `make stop`) or choose other ports", details=lines)]
    return [result("exposure", PASS, found, details=lines)]
