"""Ray's ports (docs/architecture.md §5): every port the run's Ray head will open must be free, or held by
this run's own head (`make resume` stops it first). A port taken by anything else FAILs and
names the holder: Ray would otherwise start half-way and die with "No available agent", the
cause only in one of its logs."""

from __future__ import annotations

from pyhelpers.config import ray_ports
from pyhelpers.doctor.base import FAIL, PASS, Context, Result, result
from pyhelpers.procs import groups, ports, procfs
from pyhelpers.run import layout


def _ours(ctx: Context) -> set[int]:
    """Pids of this run's Ray: its head's group and whatever references its temp dir (Ray's
    workers and agents live in process groups of their own)."""
    return groups.live_pids(layout.from_config(ctx.cfg).pids) | set(procfs.marker_matches(ctx.cfg.ray_temp_dir))


def check_ray_ports(ctx: Context) -> list[Result]:
    wanted = ray_ports.ports(ctx.cfg)
    taken, lines = [], []
    ours: set[int] | None = None
    for p in wanted:
        if ports.port_free("127.0.0.1", p.port):
            lines.append(f"{p.what}: 127.0.0.1:{p.port} ({p.knob}) free")
            continue
        ours = _ours(ctx) if ours is None else ours
        holders = ports.who_holds_port(p.port)
        if holders and all(h.pid in ours for h in holders):
            lines.append(f"{p.what}: 127.0.0.1:{p.port} ({p.knob}) held by this run's own Ray head")
            continue
        held = ports.describe_holders(p.port, holders)
        taken.append(f"{p.what} {p.port} ({p.knob}): {held}")
        lines.append(f"{p.what}: 127.0.0.1:{p.port} ({p.knob}) {held}")
    if taken:
        return [result("ray-ports", FAIL, "; ".join(taken),
                       fix=f"stop that process (a leftover run of this checkout: `make stop`), or move this run's Ray: "
                       f"set RAY_PORT (it and the {ray_ports.SPAN - 1} ports above it) or RAY_DASHBOARD_PORT "
                       "to free ones", details=lines)]
    return [result("ray-ports", PASS, f"{len(wanted)} ports free: RAY_DASHBOARD_PORT={ctx.cfg.RAY_DASHBOARD_PORT}, "
                   f"RAY_PORT={ctx.cfg.RAY_PORT}..{ctx.cfg.RAY_PORT + ray_ports.SPAN - 1}", details=lines)]
