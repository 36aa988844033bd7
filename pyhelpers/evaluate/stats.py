"""Rates with confidence intervals, and the val summary (summary.json of a val directory).

Wilson's score interval for the success rate (binary outcomes, n from tens to ~1,500: the
Wald interval under-covers near 0 and at small n). Mean scores (strict, loose; values in [0, 1])
get a normal interval mean ± z·sd/√n, clipped to [0, 1]. Hand-written: numpy has neither and
scipy/statsmodels are not in the venv; z comes from statistics.NormalDist via gate.dist.
Infra-error episodes are excluded from every rate and counted separately. No wall-clock fields.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pyhelpers.evaluate.episode import SCORED, TERMINATIONS
from pyhelpers.gate.dist import norm_ppf

LEVEL = 0.95


def _r(x: float | None) -> float | None:
    return None if x is None else float(f"{x:.6g}")


def wilson(successes: int, n: int, level: float = LEVEL) -> dict:
    """Wilson score interval of a binomial proportion."""
    if n <= 0:
        return {"rate": None, "ci_low": None, "ci_high": None, "count": 0, "n": 0, "method": "wilson",
                "level": level}
    z = norm_ppf(0.5 + level / 2)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low, high = round(max(0.0, centre - half), 12), round(min(1.0, centre + half), 12)  # no 1e-17 residue
    return {"rate": _r(p), "ci_low": _r(low), "ci_high": _r(high),
            "count": successes, "n": n, "method": "wilson", "level": level}


def mean_ci(values: Sequence[float], level: float = LEVEL) -> dict:
    """Mean with a normal-approximation interval (sample sd), clipped to [0, 1]."""
    n = len(values)
    if n == 0:
        return {"mean": None, "ci_low": None, "ci_high": None, "n": 0, "method": "normal", "level": level}
    m = sum(values) / n
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    half = norm_ppf(0.5 + level / 2) * sd / math.sqrt(n)
    return {"mean": _r(m), "ci_low": _r(max(0.0, m - half)), "ci_high": _r(min(1.0, m + half)), "n": n,
            "method": "normal", "level": level}


def outcome_block(recs: Sequence[Mapping]) -> dict:
    """n, success/strict/loose with intervals, terminations, turns and infra errors of records."""
    scored = [r for r in recs if r["termination"] in SCORED]
    infra = sorted(r["id"] for r in recs if r["termination"] == "infra_error")
    terms = {t: sum(1 for r in recs if r["termination"] == t) for t in TERMINATIONS}
    return {
        "episodes": len(recs), "n": len(scored),
        "success": wilson(sum(1 for r in scored if r["success"]), len(scored)),
        "strict": mean_ci([float(r["strict"]) for r in scored]),
        "loose": mean_ci([float(r["reward"]) for r in scored]),
        "terminations": terms,
        "turns_mean": _r(sum(r["turns"] for r in scored) / len(scored)) if scored else None,
        "infra_errors": len(infra), "infra_error_ids": infra[:50],
        "retried": sum(1 for r in recs if r["infra_errors"] and r["termination"] != "infra_error"),
    }


def val_summary(recs: Sequence[Mapping], *, label: str, round_no: int | None, tasks: Mapping,
                settings: Mapping, prompt_version: str) -> dict:
    """summary.json of bare val. per_task holds what the gate's task pool reads (success per task,
    infra errors left out)."""
    per_task = {r["task_id"]: {"success": bool(r["success"]), "strict": _r(float(r["strict"])),
                               "loose": _r(float(r["reward"])), "termination": r["termination"]}
                for r in sorted(recs, key=lambda r: r["task_id"]) if r["termination"] in SCORED}
    return {"schema_version": 1, "kind": "val", "label": label, "round": round_no, "tasks": dict(tasks),
            "prompt_version": prompt_version, "skills": "none", "settings": dict(settings),
            **outcome_block(recs), "per_task": per_task}
