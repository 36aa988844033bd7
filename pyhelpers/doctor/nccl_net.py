"""NCCL's transport between the nodes of a multi-node run (docs/multinode.md): InfiniBand when the
node has it, TCP sockets only when it has none.

NCCL picks IB verbs by itself when an HCA with an ACTIVE port is present, and falls back to TCP
sockets silently -- a 4-10x slower all-reduce with no error -- when NCCL_IB_DISABLE is set (to
anything but 0) or NCCL_NET=Socket, or when no IB port is up (NCCL 2.27 docs, "Environment
Variables": NCCL_IB_DISABLE, NCCL_NET). The job's NCCL inherits them from the shell that starts Ray
(`make train` on the head, `make join` on a worker): this check reads that environment and
/sys/class/infiniband, where the kernel lists each HCA and its ports' states ("4: ACTIVE").
A one-node run keeps NCCL inside the machine (NVLink/PCIe): nothing to check there.
"""

from __future__ import annotations

from pathlib import Path

from pyhelpers.doctor.base import PASS, WARN, Context, Result, result

IB_ROOT = Path("/sys/class/infiniband")


def ib_ports(root: Path) -> dict[str, list[str]]:
    """HCA name -> the states of its ports (e.g. "4: ACTIVE"), from the kernel's sysfs."""
    out: dict[str, list[str]] = {}
    for dev in sorted(root.iterdir()) if root.is_dir() else ():
        states = []
        for port in sorted((dev / "ports").glob("*")):
            try:
                states.append((port / "state").read_text().strip())
            except OSError:
                states.append("unreadable")
        out[dev.name] = states
    return out


def _forced_sockets(environ) -> tuple[str, str]:
    """(VAR=value, VAR) of the setting that makes NCCL use TCP sockets, or ("", "")."""
    ib_off = environ.get("NCCL_IB_DISABLE", "")
    if ib_off not in ("", "0"):
        return f"NCCL_IB_DISABLE={ib_off}", "NCCL_IB_DISABLE"
    net = environ.get("NCCL_NET", "")
    if net.lower() == "socket":
        return f"NCCL_NET={net}", "NCCL_NET"
    return "", ""


def check_nccl_net(ctx: Context) -> list[Result]:
    nnodes = ctx.cfg.NNODES
    if not ctx.cfg.multinode:
        return [result("nccl-net", PASS, "one node (NNODES=1): NCCL stays inside this machine; its transport "
                                          "between nodes is checked when NNODES > 1")]
    ports = ib_ports(IB_ROOT)
    forced, var = _forced_sockets(ctx.environ)
    shown = ", ".join(f"{dev} ({'; '.join(states) or 'no ports'})" for dev, states in ports.items())
    if not ports:
        return [result("nccl-net", PASS, f"no InfiniBand device in {IB_ROOT}: NCCL uses TCP sockets on "
                                          f"NET_IFACE={ctx.cfg.NET_IFACE} between the {nnodes} nodes"
                                          + (f" ({forced} set)" if forced else ""))]
    if forced:
        return [result("nccl-net", WARN, f"NCCL would use TCP sockets between the nodes ({forced} in this shell, "
                                          f"which Ray and the job inherit) while InfiniBand device(s) are present: "
                                          f"{shown}",
                       fix=f"unset {var} (in this shell and in the one that runs `make join` on each worker), then "
                           f"restart Ray (`make stop`, `make train`); NCCL then uses the HCAs by itself "
                           f"(NCCL_IB_HCA picks among them)")]
    active = [dev for dev, states in ports.items() if any("ACTIVE" in s for s in states)]
    if not active:
        return [result("nccl-net", WARN, f"InfiniBand device(s) present but no port ACTIVE: {shown}; NCCL falls "
                                          "back to TCP sockets without a word",
                       fix="bring a port up (`ibstat` shows why it is down: cable, subnet manager), or accept "
                           "sockets on NET_IFACE")]
    return [result("nccl-net", PASS, f"NCCL uses InfiniBand between the nodes: {', '.join(active)} ACTIVE "
                                      f"({shown})")]
