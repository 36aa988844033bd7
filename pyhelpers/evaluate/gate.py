"""The random-masked gate of one round: plan, play, estimate, decide (method: docs/gate.md).

Inputs: the round's compiled bank (round-NNN/compiled.json), the bare val summary (its per-task
outcomes make the task pool's failed share) and the VAL_TASKS records. Writes into gate/:
  plan.json        the foldover plan (written once; a resumed gate never re-plans)
  episodes.jsonl   one line per finished episode (id = the plan's episode id), slots.jsonl
  decisions.json   per-skill decisions (schema gate_decisions; `skillbank inject` reads it)
  summary.json     build_summary(...) plus the infra-error counts; no wall-clock fields
  timing.json      wall time and throughput
Skills under test: select_for_gate(bank, GATE_MAX_SKILLS) (probation first, then candidates);
background: the bank's active skills, shown in every gate episode and not estimated. Each
episode shows render(bank, "masked", SKILL_TOKEN_BUDGET, mask=show). An episode's outcome is its
full success (1/0); infra-error episodes have none, so their pair is left out of the estimate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pyhelpers.errors import ToolkitError
from pyhelpers.evaluate.episode import SCORED, EpisodeSpec
from pyhelpers.evaluate.runner import RunResult
from pyhelpers.evaluate.settings import EvalSettings
from pyhelpers.evaluate.val import check_infra, play_specs
from pyhelpers.gate.decide import decide
from pyhelpers.gate.estimate import RoundEstimate, estimate
from pyhelpers.gate.plan import GateKnobs, Plan, make_plan
from pyhelpers.gate.report import build_summary
from pyhelpers.jsonfiles import load_json, validate, write_json_atomic
from pyhelpers.policy.prompt_builder import PromptBuilder
from pyhelpers.run import layout
from pyhelpers.skills.decisions import select_for_gate
from pyhelpers.skills.render import render


def load_or_make_plan(gate_dir: Path, bank: Mapping, val_summary: Mapping, val_tasks: Sequence[dict],
                      knobs: GateKnobs, *, resume: bool) -> Plan:
    """plan.json if a gate was started here (needs --resume), else a new plan, written first."""
    path = Path(gate_dir) / "plan.json"
    ids = {s["id"] for s in bank["skills"]}
    if path.exists():
        if not resume:
            raise ToolkitError("a gate was already planned here", str(path),
                               "pass --resume to continue it, or delete the gate directory to start over")
        plan = Plan.from_json(load_json(path))
        if plan.round != bank["round"] or not set(plan.skills + plan.background) <= ids:
            raise ToolkitError("gate/plan.json does not belong to this compiled bank (round or skills differ)",
                               str(path), "delete the gate directory to plan again for the current bank")
        return plan
    gated = select_for_gate(bank, knobs.max_skills)
    active = [s["id"] for s in bank["skills"] if s["status"] == "active"]
    val_results = {tid: bool(v["success"]) for tid, v in (val_summary.get("per_task") or {}).items()}
    plan = make_plan(gated, val_results, pool_tasks=[t["task_id"] for t in val_tasks], knobs=knobs, round_no=int(bank["round"]),
                     background=active)
    write_json_atomic(path, plan.to_json())
    return plan


def gate_specs(plan: Plan, bank: Mapping, val_tasks: Sequence[dict], budget: int) -> list[EpisodeSpec]:
    by_id = {t["task_id"]: t for t in val_tasks}
    cache: dict[tuple[str, ...], object] = {}
    specs = []
    for e in plan.episodes:
        task = by_id.get(e["task_id"])
        if task is None:
            raise ToolkitError(f"the gate plan plays task {e['task_id']!r}, which is not in the val tasks",
                               "gate/plan.json", "VAL_TASKS changed since the plan was made: delete gate/ to re-plan")
        show = tuple(e["show"])
        if show not in cache:
            cache[show] = render(bank, "masked", budget, mask=show)
        specs.append(EpisodeSpec(id=e["id"], task=task, arm=e["arm"], pair=e["pair"], mask=tuple(e["mask"]),
                                 skills=cache[show]))
    return specs


def _nothing_gated(plan: Plan) -> RoundEstimate:
    """The estimate of a round with no skill under test. (gate.estimate.estimate itself fails on
    K = 0: numpy cannot reshape an empty design to (0, 0); reported to its owner.)"""
    empty = {"mean": None, "sd": None, "n": 0}
    return RoundEstimate(round=plan.round, skills=[], n_pairs=0, n_pairs_planned=0, df=0, estimable=False,
                         reason="no skills gated", arms={"off": dict(empty), "on": dict(empty)},
                         balance={"n": 0, "on_share": {}, "share_bound": None, "max_abs_corr": None,
                                  "corr_bound": None, "corr_rule": None, "share_rule": None, "ok": True,
                                  "problems": []})


def infra_block(recs: Sequence[Mapping]) -> dict:
    infra = sorted(r["id"] for r in recs if r["termination"] == "infra_error")
    return {"episodes": len(recs), "infra_errors": len(infra), "infra_error_ids": infra[:50],
            "retried": sum(1 for r in recs if r["infra_errors"] and r["termination"] != "infra_error"),
            "over_budget": sum(1 for r in recs if r["dropped"])}


def run_gate(settings: EvalSettings, make_builder: Callable[[], PromptBuilder], bank: Mapping, bank_sha256: str,
             val_summary: Mapping, val_tasks: Sequence[dict], gate_dir: Path, knobs: GateKnobs, *,
             resume: bool, progress=None) -> tuple[dict, dict, RunResult | None]:
    """Run the round's gate into gate_dir; returns (summary, decisions, run result or None when
    there was nothing to play). make_builder() loads the tokenizer; it is called only when there
    are episodes to play."""
    gate_dir = Path(gate_dir)
    plan = load_or_make_plan(gate_dir, bank, val_summary=val_summary, val_tasks=val_tasks, knobs=knobs, resume=resume)
    result = None
    outcomes: dict[str, float] = {}
    recs: list[dict] = []
    if plan.episodes:
        builder = make_builder()
        specs = gate_specs(plan, bank, val_tasks=val_tasks, budget=settings.skill_token_budget)
        result = play_specs(specs, settings, builder=builder, out_dir=gate_dir, resume=resume, label=f"gate r{plan.round}",
                            progress=progress)
        check_infra(result.records, settings, out_dir=gate_dir, what="gate")
        recs = [result.records[s.id] for s in specs]
        outcomes = {r["id"]: 1.0 if r["success"] else 0.0 for r in recs if r["termination"] in SCORED}
    est = estimate(plan, outcomes) if plan.skills else _nothing_gated(plan)
    prior = {s["id"]: s["gate"] for s in bank["skills"]}
    active = [s["id"] for s in bank["skills"] if s["status"] == "active"]
    doc = decide(est, knobs, prior, active=active, bank_sha256=bank_sha256)
    validate(doc, "gate_decisions", str(gate_dir / "decisions.json"))
    summary = build_summary(plan, est, decisions=doc, knobs=knobs)
    summary["infra"] = infra_block(recs)
    if summary["infra"]["over_budget"]:
        summary["warnings"].append(f"{summary['infra']['over_budget']} gate episodes could not show every "
                                   "skill of their mask within SKILL_TOKEN_BUDGET (see `dropped` in episodes.jsonl)")
    if not plan.skills:
        summary["warnings"].append("no skills to test: the bank has no probation or candidate skill")
    write_json_atomic(gate_dir / "decisions.json", doc)
    write_json_atomic(layout.summary(gate_dir), summary)
    return summary, doc, result
