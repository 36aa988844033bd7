"""Gate statistics: distributions, masks, plan, estimator, decision rule, report (pure, no I/O)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from support.knobs import gate_knobs

from pyhelpers import jsonfiles
from pyhelpers.errors import ToolkitError
from pyhelpers.gate import decide, dist, masks
from pyhelpers.gate.estimate import RoundEstimate, estimate, ols_hc3
from pyhelpers.gate.plan import Plan, make_plan
from pyhelpers.gate.report import build_summary, gate_report

SKILLS = [f"sk-{i:012x}" for i in range(6)]


# --- distributions -----------------------------------------------------------------------------

@pytest.mark.parametrize("q,df,want", [(0.975, 10, 2.228139), (0.95, 5, 2.015048), (0.995, 1, 63.656741),
                                       (0.99, 20, 2.527977), (0.9, 60, 1.295821), (0.8, 30, 0.853767),
                                       (0.975, 1e7, 1.959964)])
def test_t_quantiles_match_tables(q, df, want):  # tables; 0.853767 checked by numeric integration
    assert dist.t_ppf(q, df) == pytest.approx(want, abs=2e-6)


def test_t_pvalue_and_quantile_are_consistent():
    for df in (3, 17, 120):
        for q in (0.9, 0.99, 0.999):
            t = dist.t_ppf(q, df)
            assert dist.t_cdf(t, df) == pytest.approx(q, abs=1e-10)
            assert dist.t_sf2(t, df) == pytest.approx(2 * (1 - q), abs=1e-10)


# --- masks -------------------------------------------------------------------------------------

def test_mask_bits_are_deterministic_and_independent_of_order_and_additions():
    shuffled = SKILLS[::-1]
    grown = SKILLS + ["sk-ffffffffffff"]
    for pair in range(50):
        m = masks.mask(1234, 2, pair, SKILLS)
        assert m == masks.mask(1234, 2, pair, shuffled)
        assert [s for s in masks.mask(1234, 2, pair, grown) if s in SKILLS] == m  # others unchanged
        assert masks.complement(m, SKILLS) == sorted(set(SKILLS) - set(m))
    # the hash actually depends on each field
    assert len({tuple(masks.mask(seed, r, p, SKILLS)) for seed in (1, 2) for r in (0, 1) for p in range(20)}) > 20


def test_mask_bits_are_fair_coins():
    bits = [masks.bit(7, 0, p, s) for p in range(2000) for s in SKILLS]
    assert abs(sum(bits) / len(bits) - 0.5) < 3 * (0.25 / len(bits)) ** 0.5
    assert masks.uniform(1, 2, 3) == masks.uniform("1", "2", "3")


# --- plan --------------------------------------------------------------------------------------

def test_plan_composition_ids_arms_and_failed_share():
    val = {f"v{i:04d}": i % 3 == 0 for i in range(400)}  # a third succeed, two thirds failed
    k = gate_knobs(pairs=40, arm_episodes=10, failed_share=0.7)
    plan = make_plan(SKILLS, val, list(val), k, round_no=3)
    eps = plan.episodes
    assert len(eps) == 2 * 40 + 2 * 10
    assert len({e["id"] for e in eps}) == len(eps)
    assert eps[0]["id"] == "gate-r3-p0-a" and eps[1]["id"] == "gate-r3-p0-b"
    assert {e["id"] for e in eps if e["arm"] == "off"} == {f"gate-r3-off-{i}" for i in range(10)}
    for a, b in plan.pairs():
        assert a["task_id"] == b["task_id"] and sorted(a["mask"] + b["mask"]) == sorted(SKILLS)
        assert not set(a["mask"]) & set(b["mask"])
    assert all(e["mask"] == [] for e in eps if e["arm"] == "off")
    assert all(e["mask"] == sorted(SKILLS) for e in eps if e["arm"] == "on")
    slots = [e for e in eps if e["arm"] != "complement"]  # one per task slot
    failed = sum(1 for e in slots if not val[e["task_id"]])
    assert failed == round(0.7 * 60)
    for arm, size in (("mask", 40), ("off", 10), ("on", 10)):  # stratified: each block keeps the share
        f = sum(1 for e in slots if e["arm"] == arm and not val[e["task_id"]])
        assert abs(f - 0.7 * size) <= 1
    assert len({e["task_id"] for e in slots}) == 60 and plan.pool["reused"] == 0
    json.dumps(plan.to_json())  # JSON-serializable


def test_plan_is_deterministic_and_round_trips():
    val = {f"v{i:04d}": i % 2 == 0 for i in range(100)}
    k = gate_knobs(pairs=16, arm_episodes=4)
    p1 = make_plan(SKILLS, val, list(val), k, round_no=1).to_json()
    tasks = list(val)
    random.Random(5).shuffle(tasks)
    p2 = make_plan(SKILLS[::-1], dict(reversed(val.items())), tasks, k, round_no=1).to_json()
    assert jsonfiles.canonical_bytes(p1) == jsonfiles.canonical_bytes(p2)
    back = Plan.from_json(json.loads(json.dumps(p1)))
    assert back.to_json() == p1
    p1["episodes"][0]["mask"] = []
    with pytest.raises(ToolkitError, match="edited or is corrupt"):
        Plan.from_json(p1)
    assert make_plan(SKILLS, val, list(val), k, round_no=2).to_json() != make_plan(
        SKILLS, val, list(val), k, round_no=1).to_json()


def test_plan_excludes_tasks_reuses_small_pools_and_checks_inputs():
    val = {f"v{i}": i < 5 for i in range(8)}  # 3 failed, 5 succeeded
    k = gate_knobs(pairs=10, arm_episodes=2, failed_share=0.7)
    plan = make_plan(SKILLS[:2], val, list(val) + ["t-analyst"], k, round_no=0, exclude_tasks=["t-analyst", "v0"])
    assert plan.pool["excluded"] == 2 and plan.pool["pool_tasks"] == 7
    assert "v0" not in {e["task_id"] for e in plan.episodes}
    assert plan.pool["reused"] == 14 - 7 and plan.pool["failed_used"] == 3
    with pytest.raises(ToolkitError, match="GATE_MAX_SKILLS"):
        make_plan([f"sk-{i:012x}" for i in range(9)], val, val, k, round_no=0)
    with pytest.raises(ToolkitError, match="pool is empty"):
        make_plan(SKILLS, val, [], k, round_no=0)
    assert make_plan([], val, val, k, round_no=0).episodes == []
    bg = make_plan(SKILLS[:2], val, val, k, round_no=0, background=["sk-bbbbbbbbbbbb"])
    assert all("sk-bbbbbbbbbbbb" in e["show"] and "sk-bbbbbbbbbbbb" not in e["mask"] for e in bg.episodes)


# --- estimator ---------------------------------------------------------------------------------

def _noiseless(plan, b, gamma, p_task):
    """y = p_task + Σ b_k z_k + Σ γ_ij z_i z_j, no noise."""
    out = {}
    for e in plan.episodes:
        z = np.array([s in e["mask"] for s in plan.skills], dtype=float)
        out[e["id"]] = p_task[e["task_id"]] + b @ z + z @ gamma @ z
    return out


def test_estimator_recovers_banzhaf_values_exactly_without_noise():
    rng = np.random.default_rng(0)
    val = {f"v{i:03d}": bool(i % 2) for i in range(300)}
    plan = make_plan(SKILLS, val, val, gate_knobs(pairs=64, arm_episodes=8), round_no=0)
    b = np.array([0.15, -0.15, 0.0, 0.02, 0.0, -0.04])
    gamma = np.triu(rng.normal(0, 0.03, (6, 6)), 1)  # pairwise interactions
    p_task = {t: float(rng.uniform(0.1, 0.6)) for t in val}  # task difficulty: cancels in the pair
    est = estimate(plan, _noiseless(plan, b, gamma, p_task))
    banzhaf = b + (gamma + gamma.T).sum(axis=1) / 2  # each interaction split half/half
    assert est.estimable and est.n_pairs == 64 and est.df == 58
    assert np.allclose([est.beta[s] for s in SKILLS], banzhaf, atol=1e-12)
    assert est.resid_var == pytest.approx(0.0, abs=1e-20)


def test_hc3_matches_the_textbook_formula():
    rng = np.random.default_rng(1)
    X = rng.choice([-1.0, 1.0], size=(40, 3))
    y = X @ np.array([0.1, 0.0, -0.2]) + rng.normal(0, 0.5, 40)
    beta, cov, s2 = ols_hc3(X, y)
    e = y - X @ beta
    inv = np.linalg.inv(X.T @ X)
    h = np.diag(X @ inv @ X.T)
    want = inv @ X.T @ np.diag(e**2 / (1 - h) ** 2) @ X @ inv
    assert np.allclose(cov, want) and s2 == pytest.approx(e @ e / 37)
    assert np.allclose(beta, np.linalg.lstsq(X, y, rcond=None)[0])


def test_estimator_drops_incomplete_pairs_and_reports_checks():
    val = {f"v{i:03d}": False for i in range(200)}
    plan = make_plan(SKILLS, val, val, gate_knobs(pairs=50, arm_episodes=10), round_no=0)
    rng = np.random.default_rng(2)
    out = {e["id"]: bool(rng.random() < 0.4) for e in plan.episodes}
    del out["gate-r0-p3-b"]
    out["gate-r0-p4-a"] = float("nan")
    est = estimate(plan, out)
    assert est.n_pairs == 48 and est.n_pairs_planned == 50
    assert any("2 of 50 pairs incomplete" in w for w in est.warnings)
    assert est.balance["n"] == 48 and set(est.balance["on_share"]) == set(SKILLS)
    assert est.additivity is not None and est.arms["off"]["n"] == 10
    few = estimate(plan, {e["id"]: 1 for e in plan.episodes if e["pair"] is not None and e["pair"] < 5})
    assert not few.estimable and "not estimable" in few.reason


def test_balance_check_flags_a_broken_mask():
    val = {f"v{i:03d}": False for i in range(200)}
    plan = make_plan(SKILLS[:2], val, val, gate_knobs(pairs=100, arm_episodes=0), round_no=0)
    for a, b in plan.pairs():  # a "hash bug": the first skill always shown with the second
        a["mask"], b["mask"] = sorted(SKILLS[:2]), []
    est = estimate(plan, {e["id"]: 0 for e in plan.episodes})
    assert not est.balance["ok"] and any("mask balance" in w for w in est.warnings)


# --- decision rule -----------------------------------------------------------------------------

def _est(beta, se, n=256, round_no=1):
    skills = sorted(beta)
    return RoundEstimate(round=round_no, skills=skills, n_pairs=n, n_pairs_planned=n, df=n - len(skills),
                         estimable=True, beta=dict(beta), se=dict(se), resid_var=0.4)


def test_decisions_accept_reject_keep_and_validate_against_the_schema():
    k = gate_knobs(alpha=0.1)
    c = decide.critical_value(0.1, 3, 253)
    assert c == pytest.approx(dist.t_ppf(1 - 0.1 / 3, 253))
    ids = ["sk-000000000001", "sk-000000000002", "sk-000000000003"]
    doc = decide.decide(_est(dict(zip(ids, [0.2, -0.2, 0.05], strict=True)), dict.fromkeys(ids, 0.04)),
                        k, bank_sha256="0" * 64)
    d = doc["decisions"]
    assert [d[s]["decision"] for s in ids] == ["accept", "reject", "keep"]
    assert d[ids[0]]["ci_low"] == pytest.approx(0.2 - c * 0.04, abs=1e-6) and d[ids[0]]["ci_low"] > 0
    assert d[ids[0]]["rounds_tested"] == 1 and d[ids[0]]["pooled_rounds"] == 1
    assert d[ids[0]]["mde"] == pytest.approx((c + dist.t_ppf(0.8, 253)) * 0.04, rel=1e-5)
    jsonfiles.validate(doc, "gate_decisions", "decide()")
    assert decide.counts(doc) == {"accept": 1, "reject": 1, "retire": 0, "keep": 1}


def test_pooling_retirement_timeout_and_rerun_idempotence():
    k = gate_knobs(alpha=0.1, max_rounds=3, decay=0.5)
    s = "sk-00000000000a"
    # round 2 of a useless skill: pooled with round 1, |t| small -> retire (within ±MDE)
    prior = {s: [{"round": 1, "decision": "keep", "estimate": 0.004, "ci_low": -0.1, "ci_high": 0.1,
                  "se": 0.04, "n": 256}]}
    d = decide.decide(_est({s: -0.002}, {s: 0.04}, round_no=2), k, prior)["decisions"][s]
    w0, w1 = 1 / 0.04**2, 0.5 / 0.04**2
    assert d["estimate"] == pytest.approx((w0 * -0.002 + w1 * 0.004) / (w0 + w1), abs=1e-8)
    assert d["se"] < 0.04 and d["n"] == 512 and d["rounds_tested"] == 2 and d["pooled_rounds"] == 2
    assert d["decision"] == "retire" and "useless" in d["reason"]
    # round 3, undecided but not tiny: timeout retires a candidate, keeps an active skill
    prior3 = {s: prior[s] + [{"round": 2, "decision": "keep", "estimate": 0.035, "se": 0.035, "n": 512,
                              "ci_low": -0.03, "ci_high": 0.15}]}
    est3 = _est({s: 0.03}, {s: 0.04}, round_no=3)
    assert decide.decide(est3, k, prior3)["decisions"][s]["decision"] == "retire"
    assert decide.decide(est3, k, prior3, active=[s])["decisions"][s]["decision"] == "keep"
    # re-running round 2 with its own result already in the history counts nothing twice
    again = {s: prior[s] + [{"round": 2, "estimate": -0.002, "se": 0.04, "n": 256}]}
    assert decide.decide(_est({s: -0.002}, {s: 0.04}, round_no=2), k, again)["decisions"][s] == d


def test_unestimable_round_decides_nothing():
    est = RoundEstimate(round=0, skills=SKILLS, n_pairs=3, n_pairs_planned=3, df=-3, estimable=False,
                        reason="not estimable")
    doc = decide.decide(est, gate_knobs())
    assert doc["decisions"] == {}
    jsonfiles.validate(doc, "gate_decisions", "decide()")
    val = {f"v{i}": False for i in range(20)}
    plan = make_plan(SKILLS, val, val, gate_knobs(pairs=4, arm_episodes=1), round_no=0)
    est = estimate(plan, {e["id"]: 1 for e in plan.episodes})
    text = gate_report(build_summary(plan, est, decide.decide(est, gate_knobs()), gate_knobs()))
    assert "MDE: not available" in text and "not estimated this round" in text


def test_report_prints_table_mde_and_checks():
    from pyhelpers.gate.simulate import simulate_round

    k = gate_knobs(pairs=64, arm_episodes=16, seed=3)
    plan, est, doc = simulate_round({SKILLS[0]: 0.3, SKILLS[1]: 0.0}, k, seed=3)
    summary = build_summary(plan, est, doc, k)
    text = gate_report(summary, {SKILLS[0]: "Open the cheapest item"})
    assert "MDE (80% power):" in text and f"{summary['mde'] * 100:.1f} points with 64 pairs" in text
    assert "Open the cheapest item" in text and "Balance:" in text and "Additivity:" in text
    assert summary["counts"]["accept"] + summary["counts"]["keep"] + summary["counts"]["retire"] + \
        summary["counts"]["reject"] == 2
    blob = jsonfiles.canonical_bytes(summary)
    assert b"time" not in blob.replace(b"rounds_tested", b"")  # no wall-clock fields
    again = build_summary(*simulate_round({SKILLS[0]: 0.3, SKILLS[1]: 0.0}, k, seed=3), k)
    assert jsonfiles.canonical_bytes(again) == blob  # deterministic bytes


def test_report_at_zero_variance_says_why_instead_of_none_pairs():
    """Every pair difference equal (here: no episode succeeded): the variance is 0, so no number
    of pairs is 'needed'; the report said "needs about None pairs" (issue 17 §4)."""
    val = {f"v{i:03d}": bool(i % 2) for i in range(300)}
    k = gate_knobs(pairs=64, arm_episodes=8)
    plan = make_plan(SKILLS, val, val, k, round_no=0)
    est = estimate(plan, {e["id"]: 0.0 for e in plan.episodes})
    assert est.estimable and est.resid_var == 0.0
    summary = build_summary(plan, est, decide.decide(est, k), k)
    text = gate_report(summary, {})
    assert "None" not in text, text
    assert "variance 0.000" in text and "every pair difference was the same" in text, text


def test_balance_bounds_can_fail_at_every_pair_count():
    """3.5/sqrt(n) reaches 1 at n = 12 pairs (and the share bound 3*sqrt(0.25/n) reaches 0.5 at
    n = 9): a bound a correlation or share cannot exceed is a check that cannot fail. There the
    check flags what is still implausible: identical or complementary codes, a skill always or
    never on (docs/gate.md §6)."""
    from pyhelpers.gate.estimate import balance

    rng = np.random.default_rng(0)
    for n in (4, 8, 12, 20, 48):
        X = rng.choice([-1.0, 1.0], size=(n, 3))
        X[:, 1] = X[:, 0]  # a hash bug: two skills share one code
        X[: n // 2, 2], X[n // 2:, 2] = 1.0, -1.0
        got = balance(X, ["a", "b", "c"])
        assert not got["ok"] and any("a and b correlate 1.00" in p for p in got["problems"]), (n, got)
        assert got["corr_bound"] < 1.0 or got["corr_rule"] == "identical or complementary codes", (n, got)
        X[:, 1] = -X[:, 0]
        assert not balance(X, ["a", "b", "c"])["ok"], n
        X[:, 1] = 1.0  # always on
        on = balance(X, ["a", "b", "c"])
        assert any("skill b on in 100%" in p for p in on["problems"]), (n, on)


def test_the_balance_line_never_prints_a_bound_a_correlation_cannot_exceed():
    from pyhelpers.gate.estimate import balance

    X = np.array([[1, 1], [1, -1], [-1, 1], [-1, -1]] * 3, dtype=float)  # 12 pairs, uncorrelated
    bal = balance(X, ["a", "b"])
    assert bal["ok"]
    line = next(x for x in gate_report_balance_line(bal))
    assert "≤ 1.01" not in line and "identical or complementary" in line, line


def gate_report_balance_line(bal):
    from pyhelpers.gate.report import balance_line

    yield balance_line(bal)
