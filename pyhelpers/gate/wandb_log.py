"""The gate's W&B figures (M17): one run per round, job_type=gate, group=WANDB_GROUP, logged once.

Called by the evaluation issue's gate command, the single owner of gate logging. Logged at
step = round (so runs of a group line up by round), all numbers in success-probability fractions:
  gate/mde, gate/n_pairs, gate/n_skills, gate/resid_var, gate/arm_off, gate/arm_on,
  gate/additivity_gap, gate/additivity_z, gate/balance_ok, gate/{accept,reject,retire,keep},
  gate/skill/<id>/{estimate,ci_low,ci_high,se,p_value,mde,round_estimate},
  bank/<status> (count of skills by status in the bank after inject), bank/total;
run summary: gate/skill/<id>/decision and /reason (text), gate/warnings; table gate/skills.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pyhelpers.tracking import wandb_log

_SKILL_FIELDS = ("estimate", "ci_low", "ci_high", "se", "p_value", "mde", "round_estimate")
_TABLE = ("skill_id", "decision", "estimate", "ci_low", "ci_high", "se", "n", "p_value", "rounds_tested", "reason")


def gate_metrics(summary: Mapping, decisions: Mapping, bank_counts: Mapping[str, int]) -> dict:
    """The numeric figures of one gate round (None values left out)."""
    add = summary.get("additivity") or {}
    arms = summary.get("arms") or {}
    counts = summary.get("counts") or {}
    m = {"gate/mde": summary.get("mde"), "gate/n_pairs": summary["episodes"]["pairs_used"],
         "gate/n_skills": len(summary["skills"]), "gate/resid_var": summary.get("resid_var"),
         "gate/arm_off": (arms.get("off") or {}).get("mean"), "gate/arm_on": (arms.get("on") or {}).get("mean"),
         "gate/additivity_gap": add.get("gap"), "gate/additivity_z": add.get("z"),
         "gate/balance_ok": int(bool((summary.get("balance") or {}).get("ok", True)))}
    m.update({f"gate/{k}": v for k, v in counts.items()})
    for sid, d in sorted(decisions["decisions"].items()):
        m.update({f"gate/skill/{sid}/{f}": d.get(f) for f in _SKILL_FIELDS})
    m.update({f"bank/{status}": int(n) for status, n in sorted(bank_counts.items())})
    m["bank/total"] = int(sum(bank_counts.values()))
    return {k: v for k, v in m.items() if v is not None}


def log_gate(summary: Mapping, decisions: Mapping, bank_counts: Mapping[str, int], *, project: str, group: str,
             run_dir: Path, round: int, name: str | None = None, run_id: str | None = None,
             mode: str | None = None) -> dict:
    """Log round `round`'s gate figures once. Returns {run_id, logged, marker}.

    summary: report.build_summary(); decisions: the decisions document; bank_counts: skills by
    status in the next bank. run_dir: the run's state directory (W&B files go to run_dir/wandb).
    mode: WANDB_MODE (None = wandb's own default). A second call for the same round (same id)
    logs nothing and returns logged=False.
    """
    rid = run_id or wandb_log.run_id(group, "gate", f"r{round}")
    k = summary.get("knobs") or {}
    config = {"round": round, "seed": summary.get("seed"), "multiplicity": summary.get("multiplicity"),
              "plan_fingerprint": summary.get("plan_fingerprint"),
              **{f"gate_{key}": k.get(key) for key in ("pairs", "arm_episodes", "max_skills", "failed_share",
                                                       "alpha", "max_rounds", "power", "decay")}}
    metrics = gate_metrics(summary, decisions, bank_counts)

    def log(run) -> None:
        import wandb  # heavy: wandb (~1 s), only when a run is logged

        run.log(metrics, step=int(round))
        table = wandb.Table(columns=list(_TABLE))
        for sid, d in sorted(decisions["decisions"].items()):
            table.add_data(sid, *(d.get(c) for c in _TABLE[1:]))
        run.log({"gate/skills": table}, step=int(round))
        for sid, d in sorted(decisions["decisions"].items()):
            run.summary[f"gate/skill/{sid}/decision"] = d["decision"]
            run.summary[f"gate/skill/{sid}/reason"] = d.get("reason", "")
        run.summary["gate/warnings"] = "\n".join(summary.get("warnings") or [])

    done = wandb_log.log_once(project=project, group=group, job_type="gate", run_dir=run_dir, rid=rid,
                                  name=name or f"gate-r{round}", config=config, log=log, mode=mode)
    return {"run_id": rid, "logged": done, "marker": str(wandb_log.marker_path(run_dir, rid))}
