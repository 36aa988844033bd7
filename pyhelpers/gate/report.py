"""The gate's outputs for people and files: gate/summary.json and the text report.

`build_summary` gathers the plan, the round's estimate and the decisions into one JSON-ready
dict (no wall-clock fields, floats to 6 significant digits, so a re-run writes the same bytes);
`gate_report` renders it as a table per skill with the MDE line and the checks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict

from pyhelpers.gate.decide import counts, critical_value, pairs_needed, round_mde
from pyhelpers.gate.estimate import RoundEstimate
from pyhelpers.gate.plan import GateKnobs, Plan


def _clean(obj):
    if isinstance(obj, float):
        return float(f"{obj:.6g}") if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def build_summary(plan: Plan, est: RoundEstimate, decisions: Mapping, knobs: GateKnobs) -> dict:
    """The dict for gate/summary.json (it embeds the decisions document)."""
    m = len(est.beta)
    crit = critical_value(knobs.alpha, m, est.df) if est.estimable else None
    need10 = (pairs_needed(0.10, est.resid_var, alpha=knobs.alpha, m=m, power=knobs.power)
              if est.estimable and est.resid_var else None)
    arms = {a: sum(1 for e in plan.episodes if e["arm"] == a) for a in ("off", "on")}
    return _clean({
        "schema_version": 1, "round": plan.round, "seed": plan.seed, "plan_fingerprint": plan.fingerprint(),
        "knobs": asdict(knobs), "pool": plan.pool, "skills": plan.skills, "background": plan.background,
        "episodes": {"planned": len(plan.episodes), "pairs_planned": est.n_pairs_planned,
                     "pairs_used": est.n_pairs, "off_planned": arms["off"], "on_planned": arms["on"],
                     "off_used": est.arms["off"]["n"], "on_used": est.arms["on"]["n"]},
        "estimable": est.estimable, "reason": est.reason, "df": est.df, "resid_var": est.resid_var,
        "multiplicity": "bonferroni", "critical_value": crit, "power": knobs.power,
        "mde": round_mde(est, knobs), "pairs_for_10_points": need10, "counts": counts(decisions),
        "effects": {s: {"estimate": est.beta.get(s), "se": est.se.get(s), "p_value": est.p_value.get(s),
                        "on_share": est.on_share.get(s)} for s in est.skills},
        "arms": est.arms, "additivity": est.additivity, "balance": est.balance,
        "warnings": list(est.warnings), "decisions": dict(decisions),
    })


def _pts(x) -> str:
    return "—" if x is None else f"{x * 100:+.1f}"


def gate_report(summary: Mapping, titles: Mapping[str, str] | None = None) -> str:
    """Human-readable report of one gate round (what `pyhelpers` prints and logs)."""
    titles = titles or {}
    dec = summary["decisions"]
    k = summary["knobs"]
    ep = summary["episodes"]
    m = len(summary["skills"])
    lines = [f"Gate round {summary['round']}: {m} skills, {ep['pairs_used']} of {ep['pairs_planned']} pairs "
             f"used, arms off {ep['off_used']}/{ep['off_planned']} on {ep['on_used']}/{ep['on_planned']}, "
             f"seed {summary['seed']}",
             f"Effects in success-probability points; bounds are simultaneous at {1 - k['alpha']:.0%} "
             f"(Bonferroni over {m}, one-sided per side, t with {max(summary['df'], 0)} df, HC3 errors)."]
    head = f"{'skill':<16} {'title':<28} {'effect':>7} {'low':>7} {'high':>7} {'p':>7} {'rnd':>3}  decision  reason"
    lines += ["", head, "-" * len(head)]
    for s in summary["skills"]:
        d = dec["decisions"].get(s)
        if d is None:
            lines.append(f"{s[:16]:<16} {titles.get(s, '')[:28]:<28} {'—':>7} {'—':>7} {'—':>7} {'—':>7} {'':>3}  "
                         "none      not estimated this round (left as it is)")
            continue
        p = "—" if d["p_value"] is None else f"{d['p_value']:.3f}"
        lines.append(f"{s[:16]:<16} {titles.get(s, '')[:28]:<28} {_pts(d['estimate']):>7} {_pts(d['ci_low']):>7} "
                     f"{_pts(d['ci_high']):>7} {p:>7} {d['rounds_tested']:>3}  {d['decision']:<8}  {d['reason']}")
    lines.append("")
    if summary["mde"] is not None:
        need = summary["pairs_for_10_points"]
        # pairs_needed() scales with the variance: at 0 (every pair difference the same, e.g. no
        # episode succeeded) it has no answer, and "about None pairs" helped nobody.
        needs = (f"a 10-point MDE needs about {need} pairs" if need is not None else
                 "every pair difference was the same, so the pair count needed cannot be estimated")
        lines.append(f"MDE ({k['power']:.0%} power): {summary['mde'] * 100:.1f} points with {ep['pairs_used']} pairs "
                     f"(pair-difference variance {summary['resid_var']:.3f}, alpha {k['alpha']} over {m} skills); "
                     f"{needs}.")
    else:
        lines.append(f"MDE: not available ({summary['reason'] or 'nothing estimated'}).")
    bal = summary["balance"] or {}
    if bal.get("n"):
        lines.append(balance_line(bal))
    add = summary["additivity"]
    if add:
        lines.append(f"Additivity: all-on − all-off {_pts(add['observed'])} vs sum of effects {_pts(add['predicted'])}"
                     f" (gap {_pts(add['gap'])} ± {add['se'] * 100:.1f}, z {add['z']:.1f})"
                     f"{': INTERACTION' if add['interaction'] else ': ok'}")
    else:
        lines.append("Additivity: not checked (arms missing or too small).")
    c = summary["counts"]
    lines.append(f"Decisions: {c['accept']} accept, {c['reject']} reject, {c['retire']} retire, {c['keep']} keep.")
    lines += [f"WARNING: {w}" for w in summary["warnings"]]
    return "\n".join(lines) + "\n"


def balance_line(bal: dict) -> str:
    """The balance check in words. Below 13 pairs (10 for the share) the normal bounds reach values
    no correlation or share can exceed; the line then says what the check flags instead."""
    share = ("no skill always or never on" if bal.get("share_rule")
             else f"on-share within 0.5 ± {bal['share_bound']:.2f}")
    corr = (f"max |corr| {bal['max_abs_corr']:.2f}; at {bal['n']} pairs only identical or complementary codes "
            "are flagged" if bal.get("corr_rule") else f"max |corr| {bal['max_abs_corr']:.2f} ≤ {bal['corr_bound']:.2f}")
    return f"Balance: {'ok' if bal['ok'] else 'PROBLEM'} ({share}, {corr})"
