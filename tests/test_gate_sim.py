"""The gate proven by simulation with known truth (issue 3): the shipped budget meets the bar.

A seeded simulator (base success 0.3, one skill +15 points, one -15, four nulls; K = 6) runs one
gate round through the real make_plan -> estimate -> decide with the defaults of
env/defaults.env, over 200 fixed seeds. Bar: the helpful skill accepted and the harmful one
rejected in >= 90% of runs, nulls accepted in <= 10% of runs. Pure numpy, about 2 s.
"""

from __future__ import annotations

from support.knobs import gate_knobs

from pyhelpers.gate.plan import GateKnobs
from pyhelpers.gate.report import build_summary, gate_report
from pyhelpers.gate.simulate import simulate_round

HELP, HARM = "sk-00000000000a", "sk-00000000000b"
NULLS = [f"sk-0000000000{i:02x}" for i in range(4)]
EFFECTS = {HELP: 0.15, HARM: -0.15, **dict.fromkeys(NULLS, 0.0)}
SEEDS = range(200)


def shipped_knobs() -> GateKnobs:
    return gate_knobs()  # env/defaults.env's, through the Config: GateKnobs has no default of its own


def test_helpful_accepted_harmful_rejected_nulls_not_accepted():
    knobs = shipped_knobs()
    helped = harmed = any_null = 0
    null_accepts = null_rejects = 0
    mdes = []
    for seed in SEEDS:
        _, _, doc = simulate_round(EFFECTS, knobs, seed=seed, base=0.3)
        d = doc["decisions"]
        helped += d[HELP]["decision"] == "accept"
        harmed += d[HARM]["decision"] == "reject"
        acc = [d[s]["decision"] == "accept" for s in NULLS]
        null_accepts += sum(acc)
        null_rejects += sum(d[s]["decision"] == "reject" for s in NULLS)
        any_null += any(acc)
        mdes.append(d[HELP]["mde"])
    n = len(SEEDS)
    print(f"\n{knobs.pairs} pairs, K=6, {n} seeds: helpful accepted {helped / n:.1%}, harmful rejected "
          f"{harmed / n:.1%}, a null accepted in {any_null / n:.1%} of runs (per null {null_accepts / (4 * n):.2%},"
          f" rejected {null_rejects / (4 * n):.2%}), mean MDE {sum(mdes) / n * 100:.1f} points")
    assert helped / n >= 0.90
    assert harmed / n >= 0.90
    assert any_null / n <= 0.10  # stronger than "each null <= 10%"
    assert null_rejects / (4 * n) <= 0.10


def test_task_heterogeneity_only_helps_the_foldover():
    """Varying task difficulty cancels within pairs: power does not drop (it rises)."""
    knobs = shipped_knobs()
    rate = sum(simulate_round(EFFECTS, knobs, seed=s, base=0.3, task_sd=1.5)[2]["decisions"][HELP]["decision"]
               == "accept" for s in range(60)) / 60
    assert rate >= 0.9


def test_additivity_check_flags_a_crowded_prompt():
    """A -45-point penalty only when all 6 skills are shown (a high-order interaction)."""
    knobs = GateKnobs(**{**shipped_knobs().__dict__, "arm_episodes": 64})
    null = dict.fromkeys(EFFECTS, 0.0)
    crowd = sum(simulate_round(null, knobs, seed=s, base=0.5, crowd_at=6, crowd_penalty=-0.45)[1]
                .additivity["interaction"] for s in range(40))
    clean = sum(simulate_round(null, knobs, seed=s, base=0.5)[1].additivity["interaction"] for s in range(40))
    assert crowd / 40 >= 0.7 and clean / 40 <= 0.15


def test_report_of_a_simulated_round_prints_the_mde():
    knobs = shipped_knobs()
    plan, est, doc = simulate_round(EFFECTS, knobs, seed=11)
    text = gate_report(build_summary(plan, est, doc, knobs))
    print("\n" + text)
    assert "MDE (80% power):" in text and "points with 256 pairs" in text


def test_three_round_lifecycle_with_pooling():
    """Undecided skills are re-gated and pooled: over up to GATE_MAX_ROUNDS rounds a +10 point
    skill is found too, and the repeated looks keep each null's false accept rate under 10%."""
    from pyhelpers.gate.simulate import simulate_lifecycle

    effects = {HELP: 0.15, "sk-00000000000c": 0.10, HARM: -0.15, **dict.fromkeys(NULLS, 0.0)}
    runs = [simulate_lifecycle(effects, shipped_knobs(), seed=500 + s) for s in range(100)]
    assert sum(r[HELP] == "accept" for r in runs) >= 95 and sum(r[HARM] == "reject" for r in runs) >= 95
    assert sum(r["sk-00000000000c"] == "accept" for r in runs) >= 85
    assert sum(r[s] == "accept" for r in runs for s in NULLS) / (100 * len(NULLS)) <= 0.10
    assert all(v in ("accept", "reject", "retire") for r in runs for v in r.values())  # all decided


def test_knobs_from_config(toolkit_env):
    from pyhelpers.config import load

    given = {"GATE_PAIRS": "64", "GATE_ARM_EPISODES": "8", "GATE_SEED": "5", "GATE_MAX_SKILLS": "6",
             "GATE_FAILED_SHARE": "0.5", "GATE_ALPHA": "0.05", "GATE_MAX_ROUNDS": "2"}
    assert GateKnobs.from_config(load.load({**toolkit_env, **given})) == GateKnobs(
        pairs=64, arm_episodes=8, seed=5, max_skills=6, failed_share=0.5, alpha=0.05, max_rounds=2)
