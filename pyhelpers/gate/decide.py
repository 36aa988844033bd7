"""The gate's decision rule: pool rounds, correct for multiplicity, decide, and quote the MDE.

Per skill, after each round (docs/gate.md):
- pooled estimate over the rounds it was tested in: this round combined by inverse variance with
  the skill's previous (already pooled) gate result, whose weight is multiplied by
  decay^(rounds between them): the policy drifts, so old rounds count less;
- m = skills estimated this round; critical value c = t_{1 − α/m, df} (Bonferroni, one-sided per
  direction, df = this round's n_pairs − K); the interval [est − c·se, est + c·se] is a
  simultaneous one-sided confidence bound on each side at family level 1 − α;
- accept  when ci_low > 0 (helpful with family-wise error ≤ α);
- reject  when ci_high < 0 (harmful, same control on the other side);
- retire  when tested in ≥ 2 rounds and the interval lies within ±MDE (smaller than anything the
          budget can detect, i.e. |t| ≤ t_power), or after GATE_MAX_ROUNDS rounds without a verdict
          (not for active skills: they stay active unless useless or harmful);
- keep    otherwise (tested again next round).
Bonferroni rather than Holm: the decision is then exactly "the simultaneous bound excludes 0",
so every accepted skill carries a lower confidence bound > 0 that holds jointly for the family,
and the bound reported is the one decided on. With m ≤ GATE_MAX_SKILLS = 8 and few true effects
Holm's first step is Bonferroni anyway; its gain would be small.

MDE at power π: (c + t_{π, df}) · se — the smallest true effect accepted with probability π.
The round's MDE uses se = sqrt(residual variance / n_pairs) (the ±1 design has X'X ≈ n·I).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from pyhelpers.gate import dist
from pyhelpers.gate.estimate import RoundEstimate
from pyhelpers.gate.plan import GateKnobs

DECISIONS = ("accept", "reject", "retire", "keep")


def critical_value(alpha: float, m: int, df: int) -> float:
    """One-sided Bonferroni critical value t_{1 − α/m, df}."""
    return dist.t_ppf(1.0 - alpha / max(m, 1), df)


def mde(se: float, alpha: float, m: int, df: int, power: float = 0.8) -> float:
    """Minimum detectable effect at `power` for a standard error se."""
    return (critical_value(alpha, m, df) + dist.t_ppf(power, df)) * se


def pairs_needed(effect: float, resid_var: float, alpha: float, m: int, power: float = 0.8,
                 df: int = 200) -> int:
    """Foldover pairs whose MDE is `effect`, for a pair-difference variance resid_var."""
    z = critical_value(alpha, m, df) + dist.t_ppf(power, df)
    return math.ceil(z * z * resid_var / (effect * effect))


def pool(current: tuple[int, float, float, int], prior: Sequence[Mapping], decay: float
         ) -> tuple[float, float, int, int]:
    """(estimate, se, n, rounds) of this round combined with the skill's earlier gate results.

    current = (round, estimate, se, n); prior = the skill's gate results (the bank's `gate` list:
    {round, estimate, se, n, ...}). Pooling is recursive: the latest earlier result already pools
    the rounds before it, so it is combined with this round by inverse variance, its weight times
    decay^(rounds between them). Results of this round or later are ignored (a re-run never
    counts a round twice); a result without se ends the chain (this round alone).
    """
    r0, b0, s0, n0 = current
    earlier = sorted((p for p in prior if int(p["round"]) < r0), key=lambda p: int(p["round"]))
    last = earlier[-1] if earlier else None
    if last is None or not last.get("se") or s0 <= 0 or last.get("estimate") is None:
        return b0, s0, n0, 1
    w0 = 1.0 / (s0 * s0)
    w1 = decay ** (r0 - int(last["round"])) / (float(last["se"]) ** 2)
    est = (w0 * b0 + w1 * float(last["estimate"])) / (w0 + w1)
    var = (w0 * w0 * s0 * s0 + w1 * w1 * float(last["se"]) ** 2) / (w0 + w1) ** 2
    chained = 1 + sum(1 for p in earlier if p.get("se"))
    return est, math.sqrt(var), n0 + int(last.get("n", 0)), chained


def _num(x: float | None) -> float | None:
    """Six significant digits: stable bytes across BLAS builds, plenty for success rates."""
    if x is None:
        return None
    x = float(x)
    return float(f"{x:.6g}") if math.isfinite(x) else None


def decide(est: RoundEstimate, knobs: GateKnobs, prior: Mapping[str, Sequence[Mapping]] | None = None, *,
           active: Iterable[str] = (), bank_sha256: str | None = None) -> dict:
    """The round's decisions document (schema gate_decisions, read by skills.apply_decisions).

    prior: skill id -> the skill's earlier gate results (the bank's `gate` list); skills without
    any are in their first round of testing. active: ids of skills active in the tested bank:
    they are never retired for "not proven" (only as useless, or rejected as harmful).
    bank_sha256: sha256 of the compiled bank the gate tested (inject checks it).
    Skills the round could not estimate (too few pairs) are left out: the bank leaves them as
    they are and they are not counted as tested.
    """
    prior, active = prior or {}, set(active)
    m = len(est.beta) if est.estimable else 0
    df = est.df
    decisions = {}
    if m:
        c = critical_value(knobs.alpha, m, df)
        t_pow = dist.t_ppf(knobs.power, df)
    for s in est.skills if m else ():
        history = [p for p in prior.get(s, ()) if int(p["round"]) < est.round]
        b, se, n, rounds = pool((est.round, est.beta[s], est.se[s], est.n_pairs), history, knobs.decay)
        tested = len(history) + 1
        lo, hi = b - c * se, b + c * se
        p = dist.t_sf2(b / se, df) if se > 0 else (1.0 if b == 0 else 0.0)
        mde_k = (c + t_pow) * se
        pts = f"{b * 100:+.1f} points [{lo * 100:+.1f}, {hi * 100:+.1f}]"
        if lo > 0:
            dec, why = "accept", f"helpful: {pts}, lower bound > 0"
        elif hi < 0:
            dec, why = "reject", f"harmful: {pts}, upper bound < 0"
        elif tested >= 2 and -mde_k <= lo and hi <= mde_k:
            dec, why = "retire", f"useless: {pts} within ±MDE {mde_k * 100:.1f} after {tested} rounds"
        elif tested >= knobs.max_rounds and s not in active:
            dec, why = "retire", f"not proven after {tested} rounds: {pts}"
        else:
            dec, why = "keep", f"undecided: {pts}; test again ({tested} of {knobs.max_rounds} rounds)"
        decisions[s] = {"decision": dec, "estimate": _num(b), "ci_low": _num(lo), "ci_high": _num(hi),
                        "se": _num(se), "n": int(n), "p_value": _num(p), "rounds_tested": tested,
                        "reason": why, "round_estimate": _num(est.beta[s]), "round_se": _num(est.se[s]),
                        "mde": _num(mde_k), "pooled_rounds": rounds}
    return {"schema_version": 1, "round": est.round, "bank_sha256": bank_sha256, "decisions": decisions}


def counts(decisions: Mapping) -> dict[str, int]:
    """Decisions by kind, of a decisions document."""
    return {d: sum(1 for v in decisions["decisions"].values() if v["decision"] == d) for d in DECISIONS}


def round_mde(est: RoundEstimate, knobs: GateKnobs) -> float | None:
    """MDE of the budget actually run: from the residual variance and the complete pairs."""
    if not est.estimable or est.resid_var is None:
        return None
    return mde(math.sqrt(est.resid_var / est.n_pairs), knobs.alpha, m=len(est.beta), df=est.df, power=knobs.power)
