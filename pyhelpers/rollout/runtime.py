"""What one rollout process shares across its episodes: pools, clients, tokenizer, bank, tasks.

slime calls the generate function for every Sample on one event loop (slime.utils.async_utils:
a background thread of the RolloutManager actor). Event-loop-bound objects (the two semaphores,
the httpx clients) are made per loop, lazily, inside that loop; everything else (tokenizer, prompt
builder, bank, rendered skill blocks, task index) once per process and settings.

Slots: SHOPSIM_EPISODE_CONCURRENCY training episodes hold a slot at once (`episodes` semaphore);
full-skill retries take only the spare slots, SHOPSIM_SLOTS - SHOPSIM_EPISODE_CONCURRENCY
(`retries` semaphore, None when there are none), so a retry can never delay a training episode.
asyncio.Semaphore is the whole mechanism: it is fair (FIFO) and needs no library.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from pyhelpers.errors import ToolkitError
from pyhelpers.policy import tokenizer
from pyhelpers.policy.prompt_builder import PromptBuilder
from pyhelpers.policy.sglang_client import SGLangClient
from pyhelpers.rollout.settings import PluginSettings
from pyhelpers.shopsim.client import ShopSimClient
from pyhelpers.skills.bank import empty_bank, load_bank
from pyhelpers.skills.render import Rendered, render


@dataclass
class Runtime:
    settings: PluginSettings
    shopsim: ShopSimClient
    policy: SGLangClient
    episodes: asyncio.Semaphore
    retries: asyncio.Semaphore | None
    builder: PromptBuilder
    pad_id: int
    active: Rendered
    full: Rendered
    tasks: dict[str, dict]

    async def aclose(self) -> None:
        await self.shopsim.aclose()
        await self.policy.aclose()


# Module state on purpose: slime calls generate() by dotted path in its Ray actor; one Runtime per event loop.
_RUNTIMES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def router_url(args: Any) -> str:
    """slime's SGLang router, as its own generate reaches it."""
    return f"http://{args.sglang_router_ip}:{args.sglang_router_port}"


def gate_token(path: str) -> str:
    """The token of ShopSimulator's gate (a multi-node run; "" on one node), read where this actor runs."""
    if not path:
        return ""
    try:
        return Path(path).read_text().strip()
    except OSError as exc:
        raise ToolkitError(f"cannot read the ShopSimulator gate's token ({exc.strerror})", path,
                           "the run directory (RUNS_DIR) must be the same shared directory on every node: "
                           "docs/multinode.md") from None


def get(args: Any, settings: PluginSettings) -> Runtime:
    """The Runtime of the running event loop (made on first use)."""
    loop = asyncio.get_running_loop()
    rt = _RUNTIMES.get(loop)
    if rt is not None and rt.settings == settings:
        return rt
    s = settings
    builder, pad_id = _builder(s.tokenizer_path or str(getattr(args, "hf_checkpoint", "") or ""))
    bank = _bank(s.bank_path)
    rt = Runtime(
        settings=s,
        shopsim=ShopSimClient(s.shopsim_url, timeout=s.shopsim_timeout_s, reset_timeout=s.shopsim_reset_timeout_s,
                              pool_size=s.shopsim_slots, max_connections=max(64, 2 * s.shopsim_slots),
                              token=gate_token(s.shopsim_token_path)),
        policy=SGLangClient(router_url(args), timeout=s.generate_timeout_s, max_connections=1024),
        episodes=asyncio.Semaphore(s.shopsim_episode_concurrency),
        retries=asyncio.Semaphore(s.spare_slots) if s.spare_slots > 0 else None,
        builder=builder, pad_id=pad_id,
        active=render(bank, "active", s.skill_token_budget),
        full=render(bank, "full", s.skill_token_budget),
        tasks=_tasks(s.tasks_path),
    )
    _RUNTIMES[loop] = rt
    return rt


@cache
def _builder(tokenizer_path: str) -> tuple[PromptBuilder, int]:
    """The policy tokenizer (loaded once per process, by the loader evaluation uses too) in the
    shared prompt builder, and the id used to pad an otherwise empty response (eos, else pad)."""
    if not tokenizer_path:
        raise ToolkitError("no tokenizer for the policy", "shopsimrl_tokenizer_path / --hf-checkpoint",
                           "set HF_MODEL to the policy's HF directory")
    builder = tokenizer.load_builder(tokenizer_path, fix="point HF_MODEL at an HF model directory with tokenizer files")
    return builder, tokenizer.pad_id(builder.tokenizer)


@cache
def _bank(path: str) -> dict:
    """The round's bank ("" = an empty bank). Validated once per process."""
    if not path:
        return empty_bank()
    require_bank(path)
    return load_bank(Path(path))


def require_bank(path: str) -> None:
    """A round's bank must be there before its first episode ("" = an empty bank: nothing to read)."""
    if path and not Path(path).exists():
        raise ToolkitError("the round's skill bank is missing", path,
                           "the driver writes it at inject; run `make resume`")


@cache
def _tasks(path: str) -> dict[str, dict]:
    """task_id -> task record of the training task file (slime's Sample.label is the task id)."""
    out: dict[str, dict] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ToolkitError(f"cannot read the training tasks: {exc}", path,
                           "build them with `pyhelpers data build` (TRAIN_TASKS)") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            out[str(rec["task_id"])] = rec
        except (ValueError, KeyError, TypeError):
            raise ToolkitError("bad task line", f"{path}:{n}", "rebuild with `pyhelpers data build`") from None
    return out


async def close_all() -> None:
    """Close the running loop's clients (tests; slime's actor simply exits)."""
    rt = _RUNTIMES.pop(asyncio.get_running_loop(), None)
    if rt is not None:
        await rt.aclose()


def current() -> Runtime | None:
    """The running loop's Runtime, if an episode made one."""
    return _RUNTIMES.get(asyncio.get_running_loop())
