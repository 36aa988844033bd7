"""The project's .env (architecture §3) and the secrets a run needs (M8, M11, M17).

Never prints a value: a secret is reported only as "set" or "not set".
"""

from __future__ import annotations

import netrc
import stat
import subprocess
from pathlib import Path

from pyhelpers.doctor.base import FAIL, PASS, WARN, Context, Result, result

CREATE = "cp env/example.env {env} && chmod 600 {env}"


def _git(root: Path, *args: str) -> int:
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=30,
                              check=False).returncode
    except (OSError, subprocess.SubprocessError):
        return 128


def check_dotenv(ctx: Context) -> list[Result]:
    env = ctx.cfg.env_file
    if not env.is_file() and ctx.profile == "rehearse":
        return [result("dotenv", WARN, f"{env} does not exist; the rehearsal uses stand-in keys",
                       fix=CREATE.format(env=env) + ", then fill in the keys before the real run")]
    if not env.is_file():
        return [result("dotenv", FAIL, f"{env} does not exist (it holds WANDB_API_KEY / DASHSCOPE_API_KEY)",
                       fix=CREATE.format(env=env) + ", then fill in the keys")]
    problems, fixes = [], []
    mode = stat.S_IMODE(env.stat().st_mode)
    if mode & 0o077:
        problems.append(f"mode {mode:o} lets other users read it")
        fixes.append(f"chmod 600 {env}")
    repo = env.resolve().parent
    inside = _git(repo, "rev-parse", "--is-inside-work-tree") == 0
    if inside:
        if _git(repo, "ls-files", "--error-unmatch", "--", env.name) == 0:
            problems.append("it is tracked by git")
            fixes.append(f"git rm --cached {env} and commit; rotate the keys it held")
        elif _git(repo, "check-ignore", "-q", "--", env.name) != 0:
            problems.append("git does not ignore it")
            fixes.append(f"add `{env.name}` to {repo}/.gitignore")
    if problems:
        return [result("dotenv", FAIL, f"{env}: " + "; ".join(problems), fix="; ".join(fixes))]
    where = "ignored by git" if inside else "outside any git repository"
    return [result("dotenv", PASS, f"{env}: mode 600, {where}")]


def netrc_has(home: str, host: str) -> bool:
    """True when ~/.netrc (under home) has an entry for host (`wandb login` writes api.wandb.ai)."""
    path = Path(home or "~").expanduser() / ".netrc"
    if not path.is_file():
        return False
    try:
        return netrc.netrc(str(path)).authenticators(host) is not None
    except (netrc.NetrcParseError, OSError):
        return False


def check_secrets(ctx: Context) -> list[Result]:
    cfg = ctx.cfg
    found, bad, fixes = [], [], []
    mode = cfg.WANDB_MODE
    if mode in ("offline", "disabled"):
        later = "upload later with `make wandb-sync`" if mode == "offline" else "nothing is logged"
        found.append(f"W&B: WANDB_MODE={mode}, no key needed ({later})")
    elif cfg.WANDB_API_KEY:
        found.append(f"W&B: WANDB_API_KEY set (from {cfg.sources.get('WANDB_API_KEY')})")
    elif netrc_has(ctx.environ.get("HOME", ""), "api.wandb.ai"):
        found.append("W&B: api.wandb.ai entry in ~/.netrc (wandb login)")
    else:
        bad.append("W&B: WANDB_API_KEY not set, no api.wandb.ai entry in ~/.netrc")
        fixes.append(f"set WANDB_API_KEY (your W&B key) in {cfg.env_file}, or run `wandb login`, or set WANDB_MODE=offline")
    if cfg.ANALYST_ENABLED:
        if cfg.DASHSCOPE_API_KEY:
            found.append(f"analyst: DASHSCOPE_API_KEY set (from {cfg.sources.get('DASHSCOPE_API_KEY')})")
        else:
            bad.append("analyst: ANALYST_ENABLED=1 but DASHSCOPE_API_KEY is not set")
            fixes.append(f"set DASHSCOPE_API_KEY (your Bailian key) in {cfg.env_file}, or set ANALYST_ENABLED=0")
    else:
        found.append("analyst: ANALYST_ENABLED=0, no DashScope key needed")
    if bad:
        return [result("secrets", FAIL, "; ".join(bad), fix="; ".join(fixes), details=found)]
    return [result("secrets", PASS, "; ".join(found))]


