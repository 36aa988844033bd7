"""The gate's plan for one round: which task each episode plays and which skills it shows.

Pure and deterministic (stdlib only): the same skills, val results, pool, knobs and round give
the same plan, whatever order the inputs came in. The eval runner writes the plan as JSON
(`Plan.to_json()`), plays its episodes (resumable by episode id) and hands the outcomes to
`estimate.estimate()`.

Design (docs/gate.md, skillbank.md step 4):
- task pool: validation tasks only (the analyst sees training tasks); GATE_FAILED_SHARE of the
  gate's tasks come from tasks the bare val failed, the rest from the others; each group is
  ordered by a hash of (seed, round, task id) and taken in that order, distinct tasks first;
  when the pool is smaller than the plan needs, tasks are reused (counted in `pool.reused`);
- GATE_PAIRS foldover pairs: episode a shows the hash mask, episode b its complement, same task;
- all-off and all-on arms of GATE_ARM_EPISODES each (the additivity check), with the same
  failed share as the pairs (stratified);
- `background` skills (optional) are shown in every episode, arms included, and not estimated.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field

from pyhelpers.config.load import Config
from pyhelpers.errors import ToolkitError
from pyhelpers.gate import masks

ARMS = ("mask", "complement", "off", "on")


@dataclass(frozen=True)
class GateKnobs:
    """The GATE_* knobs as values (read once at the edge: `GateKnobs.from_config(cfg)`). No default
    of their own: env/defaults.env declares them (tests/test_knob_declaration.py)."""
    pairs: int
    arm_episodes: int
    seed: int
    max_skills: int
    failed_share: float
    alpha: float
    max_rounds: int
    power: float = 0.8   # power the MDE is quoted at (not knobs: the statistics' own constants)
    decay: float = 0.5   # weight of an estimate one round older when pooling rounds

    @classmethod
    def from_config(cls, cfg: Config) -> GateKnobs:
        return cls(pairs=cfg.GATE_PAIRS, arm_episodes=cfg.GATE_ARM_EPISODES,
                   seed=cfg.GATE_SEED, max_skills=cfg.GATE_MAX_SKILLS,
                   failed_share=cfg.GATE_FAILED_SHARE, alpha=cfg.GATE_ALPHA,
                   max_rounds=cfg.GATE_MAX_ROUNDS)

    @classmethod
    def from_plugin(cls, s) -> GateKnobs:
        """The same knobs as the rollout plugin's settings carry them (the one-job mode's eval hook,
        rollout/in_job_eval.py, inside slime's RolloutManager)."""
        return cls(pairs=s.gate_pairs, arm_episodes=s.gate_arm_episodes, seed=s.gate_seed,
                   max_skills=s.gate_max_skills, failed_share=s.gate_failed_share, alpha=s.gate_alpha,
                   max_rounds=s.gate_max_rounds)

    def check(self) -> None:
        bad = []
        if self.pairs < 0 or self.arm_episodes < 0 or self.max_skills < 1 or self.max_rounds < 1:
            bad.append("GATE_PAIRS/GATE_ARM_EPISODES >= 0, GATE_MAX_SKILLS/GATE_MAX_ROUNDS >= 1")
        if not 0.0 <= self.failed_share <= 1.0:
            bad.append(f"GATE_FAILED_SHARE={self.failed_share} must be in [0, 1]")
        if not 0.0 < self.alpha < 1.0:
            bad.append(f"GATE_ALPHA={self.alpha} must be in (0, 1)")
        if not 0.0 < self.power < 1.0 or not 0.0 <= self.decay <= 1.0:
            bad.append("power in (0, 1), decay in [0, 1]")
        if bad:
            raise ToolkitError("invalid gate knobs", "; ".join(bad), "fix them in .env or on the make line")


@dataclass
class Plan:
    round: int
    seed: int
    keep_prob: float
    skills: list[str]
    background: list[str]
    knobs: dict
    pool: dict
    episodes: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        doc = asdict(self)
        doc["schema_version"] = 1
        doc["fingerprint"] = self.fingerprint()
        return doc

    @classmethod
    def from_json(cls, doc: Mapping) -> Plan:
        plan = cls(**{k: doc[k] for k in ("round", "seed", "keep_prob", "skills", "background",
                                          "knobs", "pool", "episodes")})
        if "fingerprint" in doc and doc["fingerprint"] != plan.fingerprint():
            raise ToolkitError("gate plan was edited or is corrupt", f"fingerprint {doc['fingerprint']}",
                               "delete gate/plan.json to rebuild it (played episodes keep their ids)")
        return plan

    def fingerprint(self) -> str:
        """sha256 (16 hex) of the plan's content: a resumed runner checks it rebuilt the same plan."""
        body = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]

    def by_id(self) -> dict[str, dict]:
        return {e["id"]: e for e in self.episodes}

    def pairs(self) -> list[tuple[dict, dict]]:
        """(mask episode, complement episode) per pair, in pair order."""
        a = {e["pair"]: e for e in self.episodes if e["arm"] == "mask"}
        b = {e["pair"]: e for e in self.episodes if e["arm"] == "complement"}
        return [(a[p], b[p]) for p in sorted(a) if p in b]


def episode_id(round_no: int, arm: str, index: int) -> str:
    """Stable ids: gate-r{round}-p{pair}-a|b, gate-r{round}-off-{i}, gate-r{round}-on-{i}."""
    if arm in ("mask", "complement"):
        return f"gate-r{round_no}-p{index}-{'a' if arm == 'mask' else 'b'}"
    return f"gate-r{round_no}-{arm}-{index}"


def _is_failed(value) -> bool:
    """A bare-val result counts as failed when its success (bool or rate) is below one half."""
    return float(value) < 0.5


def _cycle(tasks: list[str], n: int, start: int) -> list[str]:
    return [tasks[(start + j) % len(tasks)] for j in range(n)] if tasks else []


def make_plan(gated_skill_ids: Iterable[str], val_results: Mapping[str, object], pool_tasks: Iterable[str],
              knobs: GateKnobs, *, round_no: int, background: Iterable[str] = (),
              exclude_tasks: Iterable[str] = ()) -> Plan:
    """The round's gate plan.

    gated_skill_ids: the skills under test (at most knobs.max_skills; SkillBank's select_for_gate).
    val_results: bare-val outcome per task id: success as bool or a success rate (failed < 0.5).
    pool_tasks: validation task ids the gate may play; exclude_tasks (e.g. the analyst's) are removed.
    """
    knobs.check()
    skills = sorted(set(gated_skill_ids))
    bg = sorted(set(background) - set(skills))
    if len(skills) > knobs.max_skills:
        raise ToolkitError(f"{len(skills)} skills given to the gate, more than GATE_MAX_SKILLS={knobs.max_skills}",
                           "make_plan(gated_skill_ids)", "select at most GATE_MAX_SKILLS skills (select_for_gate)")
    excluded = set(exclude_tasks)
    pool = sorted(set(pool_tasks))
    n_excluded = sum(1 for t in pool if t in excluded)
    pool = [t for t in pool if t not in excluded]

    def order(ts):
        return sorted(ts, key=lambda t: (masks.uniform(knobs.seed, round_no, "task", t), t))

    failed = order(t for t in pool if t in val_results and _is_failed(val_results[t]))
    other = order(t for t in pool if not (t in val_results and _is_failed(val_results[t])))
    blocks = [("pairs", knobs.pairs), ("off", knobs.arm_episodes), ("on", knobs.arm_episodes)] if skills else []
    total = sum(n for _, n in blocks)
    info = {"pool_tasks": len(pool), "excluded": n_excluded, "failed_available": len(failed),
            "other_available": len(other), "failed_used": 0, "other_used": 0, "reused": 0,
            "failed_share_actual": None}
    plan = Plan(round=round_no, seed=knobs.seed, keep_prob=masks.KEEP_PROB, skills=skills, background=bg,
                knobs=asdict(knobs), pool=info)
    if total == 0:
        return plan
    if not pool:
        raise ToolkitError("the gate's task pool is empty", f"round {round_no}: no validation task left",
                           "check VAL_TASKS (and that it is disjoint from the analyst's tasks)")
    # distinct tasks first: the wanted share from the failed group, then fill from the other group
    n_f = min(round(knobs.failed_share * total), len(failed))
    n_o = min(total - n_f, len(other))
    n_f = min(len(failed), total - n_o)
    chosen_f, chosen_o = failed[:n_f], other[:n_o]
    k = n_f + n_o  # distinct tasks used; the plan needs `total` slots
    slots_f = round(total * n_f / k)  # keep the failed share when slots outnumber distinct tasks
    info.update(failed_used=n_f, other_used=n_o, reused=total - k,
                failed_share_actual=round(slots_f / total, 6))
    done, pos_f, pos_o, cum_f = 0, 0, 0, 0
    for name, size in blocks:
        done += size
        want = round(slots_f * done / total) - cum_f
        cum_f += want
        tasks = _cycle(chosen_f, want, pos_f) + _cycle(chosen_o, size - want, pos_o)
        pos_f, pos_o = pos_f + want, pos_o + size - want
        tasks.sort(key=lambda t, nm=name: masks.uniform(knobs.seed, round_no, nm, t))
        for i, task in enumerate(tasks):
            if name == "pairs":
                shown = masks.mask(knobs.seed, round_no, pair=i, skill_ids=skills)
                for arm, m in (("mask", shown), ("complement", masks.complement(shown, skills))):
                    plan.episodes.append(_episode(round_no, arm, i, task=task, shown=m, bg=bg, pair=i))
            else:
                plan.episodes.append(_episode(round_no, name, i, task=task, shown=skills if name == "on" else [], bg=bg))
    return plan


def _episode(round_no: int, arm: str, index: int, task: str, shown: list[str], bg: list[str],
             pair: int | None = None) -> dict:
    return {"id": episode_id(round_no, arm, index), "task_id": task, "arm": arm, "pair": pair,
            "mask": list(shown), "show": sorted(set(shown) | set(bg))}
