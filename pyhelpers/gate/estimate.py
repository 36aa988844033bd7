"""The gate's estimator: foldover pair differences regressed on ±1 mask codes (numpy).

Pair i plays one task twice: episode a shows the skills with x_ik = +1, episode b the others.
With a linear model of the success probability, P(success) = p_task + Σ_k b_k z_k (z_k in {0,1}):

    d_i = y_ia − y_ib,   E[d_i | x_i] = Σ_k b_k (z_ik − (1 − z_ik)) = Σ_k b_k x_ik

so least squares of d on x (no intercept) estimates b_k itself, the change in success
probability from showing skill k (its Banzhaf value at q = 0.5). No factor 2 is needed: a
regression of single outcomes y on ±1 codes gives half-effects b_k/2, and the difference of the
two complementary episodes doubles it back. Task difficulty cancels in d, and so do all
pairwise interactions (they are even under the sign flip x → −x).

Standard errors: HC3 (MacKinnon & White 1985), Σ e_i² / (1 − h_ii)² in the sandwich. HC3
rather than HC1/HC2 because the gate runs few pairs (tens to a few hundred) and outcomes are
binary (heteroskedastic by construction); HC3 is the small-sample choice of Long & Ervin (2000).
Degrees of freedom: n_pairs − K.

Least squares is numpy's (lstsq / pinv); only the t distribution is hand-written (dist.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from pyhelpers.gate import dist
from pyhelpers.gate.plan import Plan


@dataclass
class RoundEstimate:
    round: int
    skills: list[str]
    n_pairs: int                      # complete pairs used
    n_pairs_planned: int
    df: int
    estimable: bool
    reason: str = ""
    beta: dict[str, float] = field(default_factory=dict)
    se: dict[str, float] = field(default_factory=dict)
    p_value: dict[str, float] = field(default_factory=dict)
    on_share: dict[str, float] = field(default_factory=dict)
    cov: list[list[float]] = field(default_factory=list)    # HC3 covariance, skills order
    resid_var: float | None = None                          # RSS / df of the pair differences
    arms: dict[str, dict] = field(default_factory=dict)     # off/on: mean, sd, n
    additivity: dict | None = None
    balance: dict | None = None
    warnings: list[str] = field(default_factory=list)


def _outcome(outcomes: Mapping[str, object], eid: str) -> float | None:
    v = outcomes.get(eid)
    if v is None or isinstance(v, str):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def design(plan: Plan, outcomes: Mapping[str, object]) -> tuple[np.ndarray, np.ndarray]:
    """(X, d): ±1 codes of each complete pair's mask episode, and y(mask) − y(complement)."""
    rows, diffs = [], []
    for a, b in plan.pairs():
        ya, yb = _outcome(outcomes, a["id"]), _outcome(outcomes, b["id"])
        if ya is None or yb is None:
            continue
        shown = set(a["mask"])
        rows.append([1.0 if s in shown else -1.0 for s in plan.skills])
        diffs.append(ya - yb)
    k = len(plan.skills)
    return np.array(rows, dtype=float).reshape(-1, k), np.array(diffs, dtype=float)


def ols_hc3(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Coefficients, HC3 covariance and residual variance (RSS / (n − k)) of y on X (no intercept)."""
    n, k = X.shape
    xtx_inv = np.linalg.inv(X.T @ X)
    beta = xtx_inv @ X.T @ y
    resid = y - X @ beta
    h = np.einsum("ij,jk,ik->i", X, xtx_inv, X)
    scale = np.where(h < 1.0 - 1e-12, resid**2 / np.maximum(1.0 - h, 1e-12) ** 2, 0.0)
    meat = X.T @ (X * scale[:, None])
    cov = xtx_inv @ meat @ xtx_inv
    return beta, cov, float(resid @ resid) / (n - k)


def _arm(plan: Plan, outcomes: Mapping[str, object], arm: str) -> dict:
    ys = [v for e in plan.episodes if e["arm"] == arm
          if (v := _outcome(outcomes, e["id"])) is not None]
    n = len(ys)
    mean = sum(ys) / n if n else None
    sd = float(np.std(ys, ddof=1)) if n >= 2 else None
    return {"mean": mean, "sd": sd, "n": n}


SHARE_Z, CORR_Z = 3.0, 3.5
EXACT_CORR = "identical or complementary codes"
EXACT_SHARE = "a skill always or never on"


def balance(X: np.ndarray, skills: list[str]) -> dict:
    """Each skill on in about half the pairs; codes nearly uncorrelated (a hash bug detector).

    Share bound 0.5 ± 3·sqrt(0.25/n); correlation bound 3.5/sqrt(n) (under independence a code
    correlation is ≈ N(0, 1/n), so 28 pairs of skills exceed 3.5/sqrt(n) by chance ~1% of rounds).
    Below 13 pairs the correlation bound is >= 1 and below 10 the share bound is >= 0.5: no value
    could exceed them. There the check flags only what independent fair codes almost never give
    and a hash bug does: |corr| = 1 (chance 2·2^-n per skill pair: 1.4% of rounds with 8 skills at
    n = 12) and a share of 0 or 1 (2·2^-n per skill). docs/gate.md §6 derives both.
    """
    n = X.shape[0]
    if n == 0:
        return {"n": 0, "on_share": {}, "share_bound": None, "max_abs_corr": None, "corr_bound": None,
                "corr_rule": None, "share_rule": None, "ok": True, "problems": []}
    share = {s: float(np.mean(X[:, j] > 0)) for j, s in enumerate(skills)}
    share_bound = SHARE_Z * math.sqrt(0.25 / n)
    corr_bound = CORR_Z / math.sqrt(n)
    share_rule = EXACT_SHARE if share_bound >= 0.5 else None
    corr_rule = EXACT_CORR if corr_bound >= 1.0 else None
    share_bound, corr_bound = min(share_bound, 0.5), min(corr_bound, 1.0)

    def share_off(v: float) -> bool:
        return v in (0.0, 1.0) if share_rule else abs(v - 0.5) > share_bound

    expected = "not always or never" if share_rule else f"50% ± {share_bound:.0%}"
    problems = [f"skill {s} on in {v:.0%} of {n} pairs (expected {expected})"
                for s, v in share.items() if share_off(v)]
    max_corr, worst = 0.0, None
    if len(skills) >= 2 and n >= 3:
        with np.errstate(invalid="ignore", divide="ignore"):
            c = np.corrcoef(X, rowvar=False)
        c = np.nan_to_num(c, nan=1.0)
        for i in range(len(skills)):
            for j in range(i + 1, len(skills)):
                if abs(c[i, j]) > max_corr:
                    max_corr, worst = abs(float(c[i, j])), (skills[i], skills[j])
        if (max_corr >= 1.0 - 1e-9) if corr_rule else (max_corr > corr_bound):
            problems.append(f"mask codes of {worst[0]} and {worst[1]} correlate {max_corr:.2f} "
                            f"({'codes identical or complementary' if corr_rule else f'bound {corr_bound:.2f}'})")
    return {"n": n, "on_share": share, "share_bound": share_bound, "max_abs_corr": max_corr,
            "corr_bound": corr_bound, "corr_rule": corr_rule, "share_rule": share_rule, "ok": not problems,
            "problems": problems}


def additivity(arms: dict, beta: np.ndarray, cov: np.ndarray) -> dict | None:
    """All-on minus all-off against the sum of the skills' effects.

    With additive effects (on − off) = Σ_k b_k; a gap beyond 1.96 standard errors means the
    skills interact (e.g. the longer prompt hurts a small model) and is reported as a warning.
    """
    off, on = arms.get("off", {}), arms.get("on", {})
    if not off.get("n") or not on.get("n") or off.get("sd") is None or on.get("sd") is None:
        return None
    observed = on["mean"] - off["mean"]
    predicted = float(beta.sum())
    se = math.sqrt(on["sd"] ** 2 / on["n"] + off["sd"] ** 2 / off["n"] + float(cov.sum()))
    gap = observed - predicted
    z = gap / se if se > 0 else (0.0 if gap == 0 else math.copysign(math.inf, gap))
    return {"observed": observed, "predicted": predicted, "gap": gap, "se": se, "z": z,
            "interaction": abs(z) > 1.96}


def estimate(plan: Plan, outcomes: Mapping[str, object]) -> RoundEstimate:
    """Per-skill effects with HC3 errors, plus the arms, balance and additivity checks.

    outcomes: episode id → success (bool or 0/1; any finite number works, e.g. a reward).
    Missing or non-finite outcomes drop their pair (counted), never the whole round.
    """
    X, d = design(plan, outcomes)
    n, k = X.shape
    planned = len(plan.pairs())
    est = RoundEstimate(round=plan.round, skills=list(plan.skills), n_pairs=n, n_pairs_planned=planned,
                        df=n - k, estimable=False)
    est.arms = {arm: _arm(plan, outcomes, arm) for arm in ("off", "on")}
    est.balance = balance(X, plan.skills)
    est.warnings += [f"mask balance: {p}" for p in est.balance["problems"]]
    if planned > n:
        est.warnings.append(f"{planned - n} of {planned} pairs incomplete (missing outcomes) and left out")
    if k == 0:
        est.reason = "no skills gated"
        return est
    if n - k < 1 or np.linalg.matrix_rank(X) < k:
        est.reason = f"not estimable: {n} complete pairs for {k} skills (need more than {k}, full rank)"
        est.warnings.append(est.reason)
        return est
    beta, cov, s2 = ols_hc3(X, d)
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    est.estimable, est.resid_var, est.cov = True, s2, cov.tolist()
    for j, s in enumerate(plan.skills):
        est.beta[s], est.se[s] = float(beta[j]), float(se[j])
        est.p_value[s] = dist.t_sf2(beta[j] / se[j], n - k) if se[j] > 0 else (1.0 if beta[j] == 0 else 0.0)
        est.on_share[s] = est.balance["on_share"][s]
    est.additivity = additivity(est.arms, beta, cov)
    if est.additivity and est.additivity["interaction"]:
        a = est.additivity
        est.warnings.append(f"additivity: all-on minus all-off = {a['observed'] * 100:+.1f} points but the "
                            f"effects sum to {a['predicted'] * 100:+.1f} (z = {a['z']:.1f}): skills interact; "
                            "consider fewer active skills (BANK_MAX_ACTIVE) or gating bundles")
    return est
