"""Student-t and normal distribution functions the gate needs (stdlib only).

Why hand-written: numpy has no t distribution and scipy is not in the venv; adding scipy (≈ 40 MB)
for two functions is not worth it. The t CDF is the textbook identity through the regularized
incomplete beta function, evaluated with the Lentz continued fraction (Numerical Recipes §6.4);
the quantile inverts that CDF by bisection, so p-values and critical values are exactly
consistent (p < a  <=>  |t| > t_ppf(1 - a/2)). tests/test_gate_stats.py checks them against
tabulated values. Normal quantiles come from statistics.NormalDist.
"""

from __future__ import annotations

import math
from statistics import NormalDist

_NORMAL = NormalDist()


def norm_ppf(q: float) -> float:
    return _NORMAL.inv_cdf(q)


def norm_cdf(x: float) -> float:
    return _NORMAL.cdf(x)


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(c) > tiny else 1.0 + aa / tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(c) > tiny else 1.0 + aa / tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(ln)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df degrees of freedom (df > 0)."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_sf2(t: float, df: float) -> float:
    """Two-sided p-value P(|T| >= |t|)."""
    return betainc(df / 2.0, 0.5, df / (df + t * t)) if t != 0 else 1.0


def t_ppf(q: float, df: float) -> float:
    """Quantile of Student's t (bisection on t_cdf to ~1e-12)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile must be in (0, 1), got {q}")
    if q == 0.5:
        return 0.0
    if q < 0.5:
        return -t_ppf(1.0 - q, df)
    lo, hi = 0.0, max(1.0, 2.0 * norm_ppf(q))
    while t_cdf(hi, df) < q:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < q:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)
