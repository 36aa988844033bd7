"""Validation of a resolved configuration, before any side effect (architecture §3).

Each rule returns Problems that name the variable, its value and the fix. The checks are pure
apart from stat() on paths (which device a path lives on, whether it can be written) and reading
/proc/self/mounts; nothing is created or changed.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path

from pyhelpers.config import ray_ports
from pyhelpers.config.declarations import read_knobs
from pyhelpers.config.load import Config
from pyhelpers.procs import netif

PORTS = ("SHOPSIM_PORT", "EVAL_PORT", "RAY_PORT", "RAY_DASHBOARD_PORT")
# Ray puts sockets at <temp>/session_<date>_<time>_<usec>_<pid>/sockets/<name>: about 66 bytes
# below the temp dir, and AF_UNIX paths stop at 107 bytes (Linux's sun_path is 108 bytes with the NUL).
RAY_TEMP_MAX = 40


@dataclass(frozen=True)
class Problem:
    level: str  # "error" | "warning"
    var: str
    message: str

    def __str__(self) -> str:
        return f"{self.level}: {self.message}"


def _err(var: str, msg: str) -> Problem:
    return Problem("error", var, msg)


def device_of(path: Path) -> tuple[int, Path]:
    """Device id of the nearest existing ancestor of path (the path may not exist yet)."""
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return os.stat(p).st_dev, p


def _shown(name: str, raw: str, secrets: frozenset[str]) -> str:
    """NAME=value as a message shows it: quoted unless a plain number, never a secret's value."""
    if name in secrets:
        return f"{name} (a secret, not shown)"
    plain = re.fullmatch(r"-?[\d.]+", raw.strip() or "x")
    return f"{name}={raw.strip() if plain else repr(raw)}"


def _types(cfg: Config, knobs) -> tuple[dict[str, int], list[Problem]]:
    """Every knob against the type and range declared beside its default; the whole numbers of
    those that pass, for the rules between knobs."""
    ints, problems, secrets = {}, [], cfg.secret_names
    for name, knob in knobs.items():
        raw = cfg.values.get(name, "")
        why = knob.type.problem(raw) if knob.type else None
        if why:
            example = f", e.g. {name}={knob.default}" if knob.default and name not in secrets else ""
            problems.append(_err(name, f"{_shown(name, raw, secrets)} {why} ({name} takes {knob.type.text}"
                                       f"{example}; declared in env/defaults.env)"))
        elif knob.type and knob.type.kind == "int":
            ints[name] = int(raw)
    return ints, problems


def _divisor_near(n: int, want: int) -> int:
    """The divisor of n closest to want (the smaller one on a tie)."""
    return min((d for d in range(1, n + 1) if n % d == 0), key=lambda d: (abs(d - want), d))


def _arithmetic(v: dict[str, int]) -> list[Problem]:
    out = []
    # Ray's ports above RAY_PORT (pyhelpers/config/ray_ports.py) count as taken too.
    used = [(v[n], n) for n in PORTS if n in v]
    used += [(v["RAY_PORT"] + off, f"RAY_PORT+{off}") for _, _, off in ray_ports.BASED[1:] if "RAY_PORT" in v]
    for port in {p for p, _ in used}:
        names = [n for p, n in used if p == port]
        if len(names) > 1:
            ray = " (Ray takes RAY_PORT and the ports above it)" if any("+" in n for n in names) else ""
            out.append(_err(names[0], f"{' and '.join(names)} are all {port} (give each service its own port){ray}"))

    def has(*names):  # (v holds only values that passed their type and range)
        return all(n in v for n in names)

    if has("NUM_GPUS", "TP_SIZE") and v["NUM_GPUS"] % v["TP_SIZE"]:
        out.append(_err("NUM_GPUS", f"NUM_GPUS={v['NUM_GPUS']} is not divisible by TP_SIZE={v['TP_SIZE']} "
                        f"(M15: use TP_SIZE=1 or 2 with NUM_GPUS=4, or NUM_GPUS a multiple of {v['TP_SIZE']})"))
    if has("ROLLOUT_GROUPS", "SAMPLES_PER_GROUP", "GLOBAL_BATCH_SIZE"):
        episodes = v["ROLLOUT_GROUPS"] * v["SAMPLES_PER_GROUP"]
        if episodes % v["GLOBAL_BATCH_SIZE"]:
            out.append(_err("GLOBAL_BATCH_SIZE",
                            f"ROLLOUT_GROUPS×SAMPLES_PER_GROUP={episodes} episodes per step is not a multiple of "
                            f"GLOBAL_BATCH_SIZE={v['GLOBAL_BATCH_SIZE']} (choose a GLOBAL_BATCH_SIZE that divides "
                            f"{episodes}, e.g. {_divisor_near(episodes, v['GLOBAL_BATCH_SIZE'])})"))
    if has("OVER_SAMPLING_GROUPS", "ROLLOUT_GROUPS") and v["OVER_SAMPLING_GROUPS"] < v["ROLLOUT_GROUPS"]:
        out.append(_err("OVER_SAMPLING_GROUPS",
                        f"OVER_SAMPLING_GROUPS={v['OVER_SAMPLING_GROUPS']} is below ROLLOUT_GROUPS="
                        f"{v['ROLLOUT_GROUPS']} (slime asserts over-sampling >= kept; raise OVER_SAMPLING_GROUPS)"))
    if has("OVER_SAMPLING_GROUPS", "ROLLOUT_GROUPS", "DRAW_LIMIT_FACTOR") and \
            v["DRAW_LIMIT_FACTOR"] * v["ROLLOUT_GROUPS"] < v["OVER_SAMPLING_GROUPS"]:
        least = -(-v["OVER_SAMPLING_GROUPS"] // v["ROLLOUT_GROUPS"])
        out.append(_err("DRAW_LIMIT_FACTOR",
                        f"DRAW_LIMIT_FACTOR={v['DRAW_LIMIT_FACTOR']} x ROLLOUT_GROUPS={v['ROLLOUT_GROUPS']} is below "
                        f"OVER_SAMPLING_GROUPS={v['OVER_SAMPLING_GROUPS']}, the groups every step draws first "
                        f"(set DRAW_LIMIT_FACTOR to at least {least})"))
    if has("SHOPSIM_SLOTS", "SHOPSIM_EPISODE_CONCURRENCY") and \
            v["SHOPSIM_SLOTS"] < v["SHOPSIM_EPISODE_CONCURRENCY"]:
        out.append(_err("SHOPSIM_SLOTS",
                        f"SHOPSIM_SLOTS={v['SHOPSIM_SLOTS']} is below SHOPSIM_EPISODE_CONCURRENCY="
                        f"{v['SHOPSIM_EPISODE_CONCURRENCY']} (episodes would wait for slots; raise SHOPSIM_SLOTS)"))
    if has("SHOPSIM_SLOTS", "EVAL_CONCURRENCY") and v["EVAL_CONCURRENCY"] > v["SHOPSIM_SLOTS"]:
        out.append(_err("EVAL_CONCURRENCY",
                        f"EVAL_CONCURRENCY={v['EVAL_CONCURRENCY']} exceeds SHOPSIM_SLOTS={v['SHOPSIM_SLOTS']} "
                        f"(lower EVAL_CONCURRENCY or raise SHOPSIM_SLOTS)"))
    if has("ROLLOUT_MAX_RESPONSE_LEN", "ROLLOUT_MAX_CONTEXT_LEN") and \
            v["ROLLOUT_MAX_RESPONSE_LEN"] >= v["ROLLOUT_MAX_CONTEXT_LEN"]:
        out.append(_err("ROLLOUT_MAX_RESPONSE_LEN",
                        f"ROLLOUT_MAX_RESPONSE_LEN={v['ROLLOUT_MAX_RESPONSE_LEN']} must be below "
                        f"ROLLOUT_MAX_CONTEXT_LEN={v['ROLLOUT_MAX_CONTEXT_LEN']} (one turn cannot fill the episode)"))
    return out


def _strings(cfg: Config, knobs) -> list[Problem]:
    out = []
    why = knobs["RUN_NAME"].type.problem(cfg.run_name) if not cfg.get("RUN_NAME") else None  # (set: its type)
    if why:
        out.append(_err("RUN_NAME", f"RUN_NAME is empty, so the run is named after WANDB_GROUP={cfg.run_name!r}, "
                                    f"which {why} (it names directories; set RUN_NAME, which takes "
                                    f"{knobs['RUN_NAME'].type.text})"))
    temp = cfg.ray_temp_dir
    if len(temp) > RAY_TEMP_MAX:
        out.append(_err("RAY_TEMP_DIR", f"RAY_TEMP_DIR={temp!r} is {len(temp)} characters; Ray's Unix sockets "
                        f"under it would pass the 107-byte limit (use at most {RAY_TEMP_MAX}, e.g. /tmp/ray-run1, "
                        f"or leave it empty)"))
    return out


def _disks(cfg: Config, knobs) -> list[Problem]:
    system = cfg.path("SYSTEM_DISK")
    if not system.exists():
        return [_err("SYSTEM_DISK", f"SYSTEM_DISK={str(system)!r} does not exist "
                                    f"(set it to the mount point of the system disk, usually /)")]
    sys_dev = os.stat(system).st_dev
    dev, found = device_of(cfg.path("TRAIN_SAVE"))
    if dev == sys_dev and cfg.get("DOCTOR_PROFILE") != "rehearse":
        # (Under the rehearse profile the checkpoints are a few KB of stand-in files; make doctor
        # reports the rule as SKIP there.)
        # A fresh machine's first `make train` stops here: name the knob the user actually sets.
        follows = cfg.sources.get("TRAIN_SAVE") == "env/defaults.env" and "${DATA_DISK}" in knobs["TRAIN_SAVE"].default
        fix = (f"mount the data disk at DATA_DISK={cfg['DATA_DISK']}, or set DATA_DISK to where the data disk is "
               "mounted (TRAIN_SAVE follows it; `df -h` lists the disks)" if follows else
               "set TRAIN_SAVE to a directory on the data disk"
               + (", or mount the data disk first" if found != cfg.path("TRAIN_SAVE") else ""))
        return [_err("TRAIN_SAVE", f"TRAIN_SAVE={cfg['TRAIN_SAVE']!r} is on the system disk (its nearest existing "
                     f"directory {str(found)!r} shares a device with SYSTEM_DISK={str(system)!r}); checkpoints "
                     f"would fill it (M2: {fix}; no data disk or GPUs on this machine? `make rehearse` runs the "
                     "whole run on stand-ins)")]
    return []


def typo_distance(a: str, b: str) -> int:
    """Edits (insert, delete, substitute, swap two neighbours) turning a into b: ROUDNS -> ROUNDS is 1."""
    prev2, prev = None, list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
            if prev2 is not None and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


def meant_knob(name: str, knobs) -> str | None:
    """The knob a .env name is a typo of: the same letters in another case, or one edit away (two
    for names of 10 characters or more); None when it is far from every knob."""
    if name.upper() in knobs:
        return name.upper()
    near = [(typo_distance(name, k), k) for k in knobs if abs(len(k) - len(name)) <= 2]
    near = [(d, k) for d, k in near if d <= (2 if len(k) >= 10 else 1)]
    return min(near)[1] if near else None


def _undeclared(cfg: Config, knobs) -> list[Problem]:
    """A .env name a typo away from a knob would leave the knob at its default without a word
    (ROUDNS=3: the run trains ROUNDS=5): refused, unless EXTRA_VARS declares it deliberate."""
    out = []
    extra = {n.strip() for n in cfg.get("EXTRA_VARS").split(",") if n.strip()}
    for name in cfg.undeclared:
        meant = meant_knob(name, knobs)
        if meant and name not in extra:
            why = "knob names are upper case; " if meant == name.upper() else ""
            out.append(_err(name, f"{name} in {cfg.env_file} is not a knob; did you mean {meant}? ({why}rename it; "
                                  f"if it is a variable of your own, add it to EXTRA_VARS in the same file)"))
    # `make train ROUDNS=3`: the Makefile's own variables (ROUND, SERVICE, PROFILE...) are not typos.
    makefile = cfg.root / "Makefile"
    own = set(re.findall(r"\$\(([A-Z_]+)\)", makefile.read_text())) if makefile.is_file() else set()
    for name in cfg.make_vars:
        meant = None if name in knobs or name in own or name in extra else meant_knob(name, knobs)
        if meant:
            out.append(_err(name, f"{name} on the make command line is not a knob; did you mean {meant}? (rename "
                                  f"it; if it is a variable of your own, add EXTRA_VARS={name})"))
    return out


# Filesystems a directory of runs cannot live on, whatever their mode bits say (root may "write" /proc).
_PSEUDO_FS = frozenset({"proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs",
                        "securityfs", "configfs", "pstore", "bpf", "efivarfs", "fusectl", "mqueue", "hugetlbfs"})


def _fs_type(path: Path) -> str:
    """The filesystem type of the mount holding path (/proc/self/mounts), '' when unknown."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return ""
    best, kind = "", ""
    for line in mounts:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        inside = str(path) == point or str(path).startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, parts[2]
    return kind


def not_a_directory(cfg: Config, name: str) -> str:
    """Why directory knob `name` can never be a directory (it, or its nearest existing part, is a
    file), as one line with the fix; '' when it can. Read-only commands (make status) refuse this too."""
    want = cfg.path(name)
    _, found = device_of(want)
    if found.is_dir():
        return ""
    what = "is a file" if found == want else f"cannot be created: {str(found)!r} is a file, not a directory"
    return f"{name}={cfg[name]!r} {what} (set {name} to a directory, or leave it at its default)"


def _writable_dir(cfg: Config, name: str) -> list[Problem]:
    """A directory knob the run creates and writes: its nearest existing part must be a directory
    this user can write on a real filesystem (a file or /proc/... would fail later, in a traceback)."""
    if why := not_a_directory(cfg, name):
        return [_err(name, why)]
    want = cfg.path(name)
    _, found = device_of(want)
    fix = f"set {name} to a directory you can write (on the data disk), or leave it at its default"
    shown = f"{name}={cfg[name]!r}"
    kind = _fs_type(found.resolve())
    if kind in _PSEUDO_FS:
        return [_err(name, f"{shown} cannot be created: {str(found)!r} is on the kernel's {kind} filesystem ({fix})")]
    readonly = bool(os.statvfs(found).f_flag & os.ST_RDONLY)
    if readonly or not os.access(found, os.W_OK | os.X_OK):
        why = "a read-only filesystem" if readonly else "a directory this user cannot write"
        verb = "is" if found == want else f"cannot be created: {str(found)!r} is"
        return [_err(name, f"{shown} {verb} {why} ({fix})")]
    return []


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _exposure(cfg: Config) -> list[Problem]:
    """ShopSimulator answers anyone who reaches it (no authentication): loopback only, unless the
    user says so with the knob that names what it exposes."""
    host = cfg.get("SHOPSIM_HOST")
    if host and not is_loopback(host) and not cfg.flag("SHOPSIM_EXPOSE_TO_NETWORK"):
        return [_err("SHOPSIM_HOST", f"SHOPSIM_HOST={host!r} is not a loopback address: ShopSimulator has no "
                     f"authentication, so anyone reaching it could drive its environments (set "
                     f"SHOPSIM_HOST=127.0.0.1, or SHOPSIM_EXPOSE_TO_NETWORK=1 to expose it on purpose)")]
    return []


def _ip_problem(name: str, raw: str) -> str:
    """Why address knob `name` cannot be a node's address on the cluster network ('' when it can)."""
    if is_loopback(raw):
        return (f"{name}={raw!r} is a loopback address: other nodes cannot reach it (give this node's address on "
                f"the network between the nodes; `ip addr` lists them)")
    try:
        ipaddress.ip_address(raw)
    except ValueError:
        return (f"{name}={raw!r} is not an IP address (Ray binds and advertises an address, not a host name: "
                f"give the IP address, e.g. from `getent hosts {raw}`)")
    return ""


def _shown_addrs(found: dict) -> str:
    shown = [f"{a} ({name})" for name, addrs in found.items() for a in addrs if not a.is_loopback and not a.is_link_local]
    return ", ".join(shown) or "none but loopback"


def _nodes(cfg: Config, ints: dict[str, int]) -> list[Problem]:
    """NNODES > 1 (docs/multinode.md): NODE_ADDR must be an address of this machine other than loopback
    (Ray binds it), NET_IFACE an interface that carries it (NCCL and Gloo use it); HEAD_ADDR, where a
    worker joins, must be an IP address other than loopback. The addresses are the kernel's, read now
    (procs/netif.py), in this process's network namespace."""
    out = []
    nnodes = ints.get("NNODES", 1)
    if (head := cfg.get("HEAD_ADDR")) and (why := _ip_problem("HEAD_ADDR", head)):
        out.append(_err("HEAD_ADDR", why))
    node, iface = cfg.get("NODE_ADDR"), cfg.get("NET_IFACE")
    if nnodes == 1 and not node and not iface:
        return out
    found = netif.addresses()
    usable = [(name, a) for name, addrs in found.items() for a in addrs
              if a.version == 4 and not a.is_loopback and not a.is_link_local]
    node_ok = False
    if not node:
        example = f" (this machine's: {_shown_addrs(found)}; e.g. NODE_ADDR={usable[0][1]})" if usable else ""
        out.append(_err("NODE_ADDR", f"NNODES={nnodes} needs NODE_ADDR, this node's IP address on the network "
                                     f"between the nodes{example}; set it in .env"))
    elif why := _ip_problem("NODE_ADDR", node):
        out.append(_err("NODE_ADDR", why))
    elif not any(ipaddress.ip_address(node) in addrs for addrs in found.values()):
        out.append(_err("NODE_ADDR", f"NODE_ADDR={node!r} is not an address of this machine (its addresses: "
                                     f"{_shown_addrs(found)}; set NODE_ADDR to one of them, the one on the network "
                                     f"between the nodes)"))
    else:
        node_ok = True
    carrier = netif.interface_of(node) if node_ok else None
    if not iface:
        if nnodes > 1:
            fix = f"set NET_IFACE={carrier}, the interface that carries NODE_ADDR={node}" if carrier else \
                "set NET_IFACE to the interface that carries NODE_ADDR (`ip addr` lists them)"
            out.append(_err("NET_IFACE", f"NNODES={nnodes} needs NET_IFACE, the interface NCCL and Gloo use between "
                                         f"the nodes ({fix})"))
    elif iface not in found:
        out.append(_err("NET_IFACE", f"NET_IFACE={iface!r} is not an interface of this machine (its interfaces: "
                                     f"{', '.join(sorted(found))}; set NET_IFACE to the one that carries NODE_ADDR)"))
    elif node_ok and carrier != iface:
        out.append(_err("NET_IFACE", f"NET_IFACE={iface!r} does not carry NODE_ADDR={node} ({carrier} does: set "
                                     f"NET_IFACE={carrier}, or NODE_ADDR to an address of {iface})"))
    return out


def _one_job(cfg: Config) -> list[Problem]:
    """ONE_JOB=1 (docs/one-job-mode.md): the mode exports on the CPU, never from the GPUs inside the save."""
    if cfg.values.get("ONE_JOB") != "1":
        return []
    out = []
    if cfg.values.get("SAVE_HF") == "1":
        out.append(_err("ONE_JOB", "ONE_JOB=1 exports each round on the CPU while the next trains, and SAVE_HF=1 "
                        "would write it from the GPUs inside the save (set SAVE_HF=0, or ONE_JOB=0)"))
    return out


def check(cfg: Config) -> list[Problem]:
    """Every validation of architecture §3; errors first, in a stable order."""
    knobs = read_knobs(cfg.root / "env" / "defaults.env")
    problems = [_err(".env", f"{e}") for e in cfg.env_errors]
    ints, typed = _types(cfg, knobs)
    problems += typed + _arithmetic(ints) + _strings(cfg, knobs) + _disks(cfg, knobs) + _writable_dir(cfg, "RUNS_DIR")
    problems += _exposure(cfg) + _nodes(cfg, ints) + _undeclared(cfg, knobs) + _one_job(cfg)
    return sorted(problems, key=lambda p: p.level != "error")
