"""Test support for the evaluation runner: a val task set, a bank with planted skills, the fakes.

    world = make_world(tmp / "world", n_tasks=120)       # tokenizer, catalog, policy, val.jsonl, bank
    shop = start_fake_shopsim(world.catalog, slots=48, seed=1, retries=3, delay=0.2)
    sg = start_fake_sglang(world.tokenizer, policy=world.policy, latency_ms=0)
    env = eval_env(tmp, world, shop.port, sg.port)      # process environment for `python -m pyhelpers eval ...`

The planted truth (tests/fakes/fake_sglang.py): every task succeeds with probability `base`
when no skill is shown; showing HELP adds +0.4, HARM -0.25 (the fake finds a skill by its
"[sk-…]" id in the system message, exactly as render() writes it).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from conftest import ROOT, _knob_names
from fakes.shop_fixture import write_shop_fixture

from support.skillbank import bank_of, sid
from support.tokenizer import build_tokenizer

HELP_TEXT = ("the product page lists options", "always pick the option named in the instruction before buying")
HARM_TEXT = ("search results are shown", "buy the first product you see without checking")
HELP, HARM = sid(*HELP_TEXT), sid(*HARM_TEXT)
MARKER = r"\[(sk-[0-9a-f]{12})\]"


@dataclass
class World:
    root: Path
    tokenizer: Path
    catalog: Path
    policy: Path
    val_tasks: Path
    tasks: list[dict]
    bank: dict
    base: float


def make_world(root: Path, *, n_tasks: int = 120, base: float = 0.3, seed: int = 0,
               help_delta: float = 0.4, harm_delta: float = -0.25) -> World:
    root = Path(root)
    tok = build_tokenizer(root / "tok")
    fx = write_shop_fixture(root / "shop", n_tasks=n_tasks, n_eval=n_tasks, base_success=base, seed=seed,
                            effects=[{"skill": HELP, "delta": help_delta}, {"skill": HARM, "delta": harm_delta}])
    policy = json.loads(fx["policy"].read_text(encoding="utf-8"))
    policy["marker_regex"] = MARKER
    fx["policy"].write_text(json.dumps(policy, ensure_ascii=False), encoding="utf-8")
    tasks = [{"task_id": f"v{t['idx']:04d}", "shopsim_idx": t["idx"], "split": "val", "instruction": t["instruction"]}
             for t in fx["tasks"]]
    val = root / "val.jsonl"
    val.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks), encoding="utf-8")
    bank = bank_of([HELP_TEXT, HARM_TEXT], statuses=["candidate", "candidate"])
    return World(root, tok, fx["server_file"], fx["policy"], val, tasks, bank, base)


def eval_env(tmp: Path, world: World, shop_port: int, sglang_port: int, **knobs: object) -> dict[str, str]:
    """An isolated process environment (like conftest's toolkit_env, usable at module scope)."""
    tmp = Path(tmp)
    env = {k: v for k, v in os.environ.items() if k not in set(_knob_names())}
    env_file = tmp / ".env"
    env_file.write_text("")
    env_file.chmod(0o600)
    for var in ("WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_ARTIFACT_DIR"):
        env[var] = str(tmp / var.lower())
    env.pop("WANDB_RUN_GROUP", None)
    env.pop("WANDB_JOB_TYPE", None)
    env.update({
        "SHOPSIMRL_ENV_FILE": str(env_file), "RUNS_DIR": str(tmp / "runs"), "TRAIN_SAVE": str(tmp / "save"),
        "DATA_DISK": str(tmp), "SYSTEM_DISK": "/dev/shm", "WANDB_MODE": "offline", "RUN_NAME": "evaltest",
        "WANDB_GROUP": "evalgrp", "WANDB_PROJECT": "shopsim-test", "VAL_TASKS": str(world.val_tasks),
        "SHOPSIM_HOST": "127.0.0.1", "SHOPSIM_PORT": str(shop_port), "EVAL_PORT": str(sglang_port),
        "SHOPSIM_SLOTS": "48", "EVAL_CONCURRENCY": "32", "MAX_TURNS": "8", "ROLLOUT_MAX_CONTEXT_LEN": "32000",
        "ROLLOUT_MAX_RESPONSE_LEN": "256", "SKILL_TOKEN_BUDGET": "512", "GATE_PAIRS": "96",
        "GATE_ARM_EPISODES": "8", "SHOPSIM_RESET_RETRIES": "3", "SHOPSIM_RESET_DELAY": "0.2",
        "PYTHONPATH": str(ROOT),
    })
    env.update({k: str(v) for k, v in knobs.items()})
    return env


def planted_success(world: World, task: dict, shown: list[str] = ()) -> bool:
    """What the fake policy decides for a task and shown skills (fake_sglang.Policy.decide's rule)."""
    from fakes.fake_sglang import Policy, unit

    pol = Policy(json.loads(world.policy.read_text(encoding="utf-8")), 0)
    shown = sorted(set(shown))
    planted = sorted(e["skill"] for e in pol.effects if e.get("skill") in shown)
    p = pol.base + sum(float(e["delta"]) for e in pol.effects if e.get("skill") in shown)
    return unit(pol.seed, task["instruction"], shown, planted) < p


def round_dir(tmp: Path, round_no: int = 0) -> Path:
    return Path(tmp) / "runs" / "evaltest" / "rounds" / f"round-{round_no:03d}"


def read_episodes(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


OUTCOME = ("id", "task_id", "arm", "mask", "shown", "termination", "turns", "reward", "strict", "success", "actions")


def outcomes(recs: list[dict]) -> dict[str, tuple]:
    """The per-episode outcome fields (no timings, no attempt counts), keyed by id."""
    return {r["id"]: tuple(json.dumps(r[k], sort_keys=True) for k in OUTCOME) for r in recs}
