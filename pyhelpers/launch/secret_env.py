"""Which process of a run gets which secret (architecture §3, "Who holds a secret").

The driver (`pyhelpers run loop`) reads the secrets once, with its configuration (.env, mode 600,
or its own environment), and then takes every secret-named variable out of its environment
(`drop_all`): ShopSimulator, the Ray head and every Ray process, the slime job, the eval server,
the converter, `tail` and the report inherit none. A process that uses a key gets that key, and
only it, when it is started:

| secret            | used by                                              | reaches it through                |
|-------------------|------------------------------------------------------|-----------------------------------|
| DASHSCOPE_API_KEY | the analyst sidecar (`pyhelpers analyst run`)        | its environment, at spawn (USERS) |
| WANDB_API_KEY     | the toolkit's W&B loggers: the analyst (`--wandb`),  | its environment, at spawn (USERS) |
|                   | `pyhelpers run log-wandb`                            |                                   |
| WANDB_API_KEY     | slime's W&B loggers: train.py (`init_tracking`),     | a 0600 netrc file that NETRC, a   |
|                   | its RolloutManager and Megatron actors (secondary    | path in the job's runtime env,    |
|                   | `init_tracking(primary=False)`)                      | names (`job_netrc`)               |
| Ray's token       | every Ray process                                    | its 0600 file (ray_auth.py)       |

Why a file for slime's processes: the actors are started by the raylet with the raylet's
environment plus the job's runtime env, and that runtime env is stored in Ray's GCS and shown in
the job's info (`ray job list`, the dashboard) -- no place for a key; slime itself takes the key
only from `--wandb-key` (argv: refused, slime_flags.FORBIDDEN) or lets wandb find it
(slime 624b824 slime/observability/wandb_utils.py:40-41,134-135; train.py:15;
slime/ray/rollout.py:402; slime/backends/megatron_utils/actor.py:83). wandb looks for the key in
WANDB_API_KEY, then in the netrc file that NETRC names (wandb 0.31.0
sdk/lib/wbauth/wbnetrc.py:194-216, `machine <host of WANDB_BASE_URL>`). The file lives in the run's
`ray/` directory (0700, left out of `make migrate-pack`) only while a job runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from urllib.parse import urlsplit

from pyhelpers.config.load import Config
from pyhelpers.run import layout

# Toolkit process -> the secrets it uses (the only processes started with one).
USERS: dict[str, tuple[str, ...]] = {
    "analyst": ("DASHSCOPE_API_KEY", "WANDB_API_KEY"),  # DashScope's client; logs to W&B live (--wandb)
    "wandb-log": ("WANDB_API_KEY",),                    # `pyhelpers run log-wandb`
}
WANDB_HOST_DEFAULT = "https://api.wandb.ai"


def without_secrets(cfg: Config, environ: Mapping[str, str]) -> dict[str, str]:
    """environ minus every secret-named variable (…_KEY, …_TOKEN, …, SECRET_VARS)."""
    return {k: v for k, v in environ.items() if not cfg.is_secret(k)}


def drop_all(cfg: Config, environ: MutableMapping[str, str] | None = None) -> None:
    """Take every secret out of this process's environment (the driver's, once it has read its
    configuration): what it starts from now on inherits none."""
    environ = os.environ if environ is None else environ
    for name in [k for k in environ if cfg.is_secret(k)]:
        del environ[name]


def for_user(cfg: Config, user: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of toolkit process `user` (USERS): the given one (default: this process's)
    without secrets, plus the secrets `user` uses that are set."""
    env = without_secrets(cfg, os.environ if environ is None else environ)
    env.update({name: cfg[name] for name in USERS[user] if cfg.get(name)})
    return env


def job_netrc_entry(cfg: Config, run_dir: Path) -> dict[str, str]:
    """The job's runtime env entry naming its W&B netrc, {"NETRC": path}; {} when there is no key
    to hand (none set, or W&B disabled: wandb then finds the user's own ~/.netrc, or needs none)."""
    if not cfg.WANDB_API_KEY or cfg.WANDB_MODE == "disabled":
        return {}
    return {"NETRC": str(layout.job_netrc(run_dir))}


def job_netrc(cfg: Config, run_dir: Path) -> dict[str, str]:
    """Write the slime job's W&B netrc (0600, whole before it is visible) and return its runtime
    env entry (job_netrc_entry)."""
    entry = job_netrc_entry(cfg, run_dir)
    if not entry:
        remove_job_netrc(run_dir)
        return {}
    key, path = cfg.WANDB_API_KEY, layout.job_netrc(run_dir)
    # wandb asks for the key of the host it talks to: WANDB_BASE_URL (.env or the environment the
    # job inherits), else W&B's cloud.
    base = cfg.get("WANDB_BASE_URL") or os.environ.get("WANDB_BASE_URL") or WANDB_HOST_DEFAULT
    host = urlsplit(base).netloc or urlsplit(WANDB_HOST_DEFAULT).netloc
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, f"machine {host}\n  login user\n  password {key}\n".encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return entry


def remove_job_netrc(run_dir: Path) -> None:
    """The job's netrc goes once the job has ended (a key on disk only while it is used)."""
    layout.job_netrc(run_dir).unlink(missing_ok=True)
