"""A seeded simulator of gate outcomes with known effects (tests and bench/gate_power.py).

Each episode succeeds with probability clip(p_task + Σ effect of the gated skills it shows, 0, 1),
where p_task = logistic(logit(base) + task_sd · N(0, 1)) per task (task_sd = 0: every task has
success probability `base`), plus `crowd_penalty` when an episode shows at least `crowd_at`
gated skills (a prompt-length effect: a high-order interaction the additivity check should
flag). Plans come from the real make_plan and outcomes go through the real estimate/decide,
so a simulation exercises exactly the code the runner uses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from pyhelpers.gate.decide import decide
from pyhelpers.gate.estimate import RoundEstimate, estimate
from pyhelpers.gate.plan import GateKnobs, Plan, make_plan


def outcomes(plan: Plan, effects: Mapping[str, float], rng: np.random.Generator, base: float = 0.3,
             task_sd: float = 0.0, crowd_at: int | None = None, crowd_penalty: float = 0.0) -> dict[str, bool]:
    """Episode id → success, drawn with rng."""
    tasks = sorted({e["task_id"] for e in plan.episodes})
    logit = math.log(base / (1.0 - base))
    p_task = dict(zip(tasks, 1.0 / (1.0 + np.exp(-(logit + task_sd * rng.standard_normal(len(tasks))))),
                      strict=True))
    out = {}
    for e in plan.episodes:
        p = p_task[e["task_id"]] + sum(effects.get(s, 0.0) for s in e["mask"])
        if crowd_at is not None and len(e["mask"]) >= crowd_at:
            p += crowd_penalty
        out[e["id"]] = bool(rng.random() < min(max(p, 0.0), 1.0))
    return out


def simulate_round(effects: Mapping[str, float], knobs: GateKnobs, seed: int, *, round_no: int = 0,
                   base: float = 0.3, task_sd: float = 0.0, n_tasks: int = 400, crowd_at: int | None = None,
                   crowd_penalty: float = 0.0, prior: Mapping | None = None) -> tuple[Plan, RoundEstimate, dict]:
    """One gate round on simulated outcomes: (plan, estimate, decisions). Masks use GATE_SEED = seed."""
    knobs = GateKnobs(**{**knobs.__dict__, "seed": seed})
    rng = np.random.default_rng([seed, round_no])
    tasks = [f"v{i:05d}" for i in range(n_tasks)]
    val = {t: bool(rng.random() < base) for t in tasks}
    plan = make_plan(list(effects), val, pool_tasks=tasks, knobs=knobs, round_no=round_no)
    est = estimate(plan, outcomes(plan, effects, rng, base=base, task_sd=task_sd, crowd_at=crowd_at, crowd_penalty=crowd_penalty))
    return plan, est, decide(est, knobs, prior)


def simulate_lifecycle(effects: Mapping[str, float], knobs: GateKnobs, seed: int, **kw) -> dict[str, str]:
    """Skills gated round after round (GATE_MAX_ROUNDS at most) until decided: id -> final decision.

    Each round's results are kept as the bank keeps them (skill.gate entries: round, decision,
    estimate, ci_low, ci_high, se, n) and passed back as `prior`, so pooling runs as in the loop.
    """
    prior: dict[str, list[dict]] = {}
    live, final = dict(effects), {}
    for r in range(knobs.max_rounds):
        if not live:
            break
        doc = simulate_round(live, knobs, seed, round_no=r, prior=prior, **kw)[2]
        for s, d in doc["decisions"].items():
            prior.setdefault(s, []).append({"round": r, **{f: d[f] for f in
                                                           ("decision", "estimate", "ci_low", "ci_high", "se", "n")}})
            if d["decision"] != "keep":
                final[s] = d["decision"]
                live.pop(s)
    return {s: final.get(s, "keep") for s in effects}
