"""slime's eval hook for the one-job mode (docs/one-job-mode.md): `--eval-function-path
pyhelpers.rollout.in_job_eval.evaluate` with `--eval-interval STEPS_PER_ROUND` and
`--skip-eval-before-train`.

slime's RolloutManager calls it once a round's last rollout is trained, saved and its weights are
synced to the job's engines (slime 624b824 train.py:71-91; ray/rollout.py:513-526, through
rollout/base_types.py call_rollout_fn(..., evaluation=True)). It plays round r's bare val
(r = rollout_id // STEPS_PER_ROUND) through the toolkit's own eval code -- the evaluate stage's --
against slime's router, that is on the job's engines holding the round's weights, into
rounds/round-NNN/val/ exactly as the evaluate stage writes it (resumable per episode: a val a killed
job began goes on where it stopped, nothing played twice). It returns the scored episodes' rewards
(REWARD's measure) for slime to log as eval/shopsim_val -- slime divides by their count
(observability/rollout_metrics.py:232), so the list is never empty -- and the summary's figures
beside them.

Then, once compile (on the driver, after the analyst's drain) wrote the round's compiled.json --
waited for up to ANALYST_DRAIN_TIMEOUT after val -- the random-masked gate, into
rounds/round-NNN/gate/ as the evaluate stage writes it; its skills tested and decisions are
logged beside val as eval/shopsim_gate/*.

Each records its `episodes` event (the seconds the policy played) in the run's events.jsonl, as the
evaluate stage does. ONE_JOB=1 runs it (stages/one_job.py; `make plan` shows the mode's command
line, flags.in_job_eval_flags). On a multi-node run the hook may play on a worker: the simulator is
then the head's gate, with the run's token (eval_settings).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyhelpers.errors import ToolkitError
from pyhelpers.gate.decide import counts
from pyhelpers.gate.plan import GateKnobs
from pyhelpers.rollout import bank_wait, flags, runtime, settings, slime_compat
from pyhelpers.run.layout import RoundFiles
from pyhelpers.skills.bank import bank_sha256, load_bank

if TYPE_CHECKING:
    from pyhelpers.evaluate.settings import EvalSettings

KEY = flags.EVAL_KEY  # slime logs eval/<KEY>; also the name in --eval-prompt-data (slime's check only)
GATE_KEY = "shopsim_gate"  # the gate's figures: metrics only (a round with nothing to gate plays no episode)
# a val record's field for each REWARD (evaluate/episode.py: "reward" is the loose score)
RECORD_FIELD = {"strict": "strict", "loose": "reward", "success": "success"}


def evaluate(args: Any, rollout_id: int, data_source: Any, evaluation: bool = True) -> Any:
    if not evaluation:
        raise ToolkitError("in_job_eval.evaluate is slime's eval function, called here for a training rollout",
                           "--rollout-function-path", "name pyhelpers.rollout.rollout.generate_rollout there and "
                           "this one in --eval-function-path")
    if getattr(args, "save_debug_rollout_data", None):
        # slime saves an evaluation's samples (observability/rollout_data_utils.py:148-149: data[key]["samples"]),
        # which this function does not make: slime would fail after the whole val was played
        raise ToolkitError("slime's --save-debug-rollout-data saves an evaluation's samples, which the in-job val "
                           "does not return", "--save-debug-rollout-data", "drop it from the job's flags")
    s = settings.from_args(args)
    r = round_of(s, int(rollout_id))
    files = RoundFiles(Path(s.for_rollout(int(rollout_id)).round_dir))
    ev = _Evaluation(s, args)
    summary, records = ev.val(files, r)
    rewards = [float(rec[RECORD_FIELD[s.reward]]) for rec in records if rec["termination"] != "infra_error"]
    if not rewards:  # slime would divide by zero at the round boundary and end the job
        raise ToolkitError(f"round {r}'s val scored no episode", str(files.val_dir / "episodes.jsonl"),
                           "check ShopSimulator and the job's engines, then resume")
    gate_summary, decisions = ev.gate(files, summary)
    return slime_compat.eval_output({KEY: {"rewards": rewards}}, metrics={**figures(summary),
                                                                          **gate_figures(gate_summary, decisions)})


def round_of(s: settings.PluginSettings, rollout_id: int) -> int:
    """The round whose last rollout `rollout_id` is; refused for any other rollout (slime evaluates
    wherever --eval-interval says, and before rollout 0 unless --skip-eval-before-train)."""
    n = s.steps_per_round
    if (rollout_id + 1) % n:
        raise ToolkitError(f"slime asked for an evaluation after rollout {rollout_id}, which ends no round "
                           f"(STEPS_PER_ROUND={n})", "--eval-interval",
                           f"pass --eval-interval {n} and --skip-eval-before-train (`make plan` shows the job's flags)")
    return rollout_id // n


def eval_settings(s: settings.PluginSettings, args: Any) -> EvalSettings:
    """The eval code's settings for the job's own engines (slime's router). On a multi-node run the
    hook may play on any node: the simulator is then the head's gate, and the token it wants is read
    here, where the hook runs, from the run's token file (slime.yaml names the file, never the token)."""
    from pyhelpers.evaluate.settings import EvalSettings  # local: the eval code, only where the hook plays

    return EvalSettings.from_plugin(s, server_url=runtime.router_url(args),
                                    shopsim_token=runtime.gate_token(s.shopsim_token_path))


class _Evaluation:
    """One round boundary's evaluation in the job: the settings, the job's router, the val tasks and
    the prompt builder, shared by val and the gate."""

    def __init__(self, s: settings.PluginSettings, args: Any):
        # local: httpx, the tokenizer and the eval code, only in the process that evaluates
        from pyhelpers.evaluate import builders
        from pyhelpers.tasks.files import load_tasks

        if not s.val_tasks_path:
            raise ToolkitError("no val task file for the in-job evaluation", f"{settings.PREFIX}val_tasks_path",
                               "the driver writes it from VAL_TASKS (write_plugin_yaml)")
        self.s = s
        self.settings = eval_settings(s, args)
        self.tasks_path = Path(s.val_tasks_path)
        self.tasks = load_tasks(self.tasks_path, split="val")
        self.builder = builders.builder_for(s.tokenizer_path or str(getattr(args, "hf_checkpoint", "") or ""))

    def val(self, files: RoundFiles, r: int) -> tuple[dict, list[dict]]:
        """Round r's bare val into files.val_dir; its summary and records in the tasks' order."""
        from pyhelpers.evaluate import val  # local: as in __init__
        from pyhelpers.evaluate.progress import LatestLine  # local: as in __init__
        from pyhelpers.evaluate.runner import record_episodes  # local: as in __init__

        summary, result = val.run_val(self.settings, self.builder, self.tasks, out_dir=files.val_dir, resume=True,
                                      label=files.dir.name, round_no=r, tasks_info=val.tasks_meta(self.tasks_path, self.tasks),
                                      progress=LatestLine(files.val_progress))
        record_episodes(files.run_dir, "val", round_no=r, result=result)
        return summary, [result.records[spec.id] for spec in val.val_specs(self.tasks)]

    def gate(self, files: RoundFiles, val_summary: dict, poll_s: float = 1.0) -> tuple[dict, dict]:
        """The random-masked gate of the round's compiled bank, once compile (on the driver, after the
        analyst's drain) wrote it: waited for up to ANALYST_DRAIN_TIMEOUT after val."""
        from pyhelpers.evaluate import gate  # local: as in __init__
        from pyhelpers.evaluate.progress import LatestLine  # local: as in __init__
        from pyhelpers.evaluate.runner import record_episodes  # local: as in __init__

        waited = bank_wait.wait_for_file(files.compiled, self.s.analyst_drain_timeout, poll_s)
        if not waited:
            raise ToolkitError(f"no compiled bank {self.s.analyst_drain_timeout:g} s (ANALYST_DRAIN_TIMEOUT) after "
                               "the round's val", str(files.compiled),
                               "see why compile did not finish (the driver's log); the round's val is kept, "
                               "its gate not played")
        bank = load_bank(files.compiled)
        summary, decisions, result = gate.run_gate(self.settings, lambda: self.builder, bank=bank,
                                                   bank_sha256=bank_sha256(bank), val_summary=val_summary,
                                                   val_tasks=self.tasks, gate_dir=files.gate_dir,
                                                   knobs=GateKnobs.from_plugin(self.s), resume=True,
                                                   progress=LatestLine(files.gate_progress))
        if result is not None:
            record_episodes(files.run_dir, "gate", round_no=int(bank["round"]), result=result)
        return summary, decisions


def gate_figures(summary: dict, decisions: dict) -> dict[str, int]:
    """The gate's outcome slime logs beside val: skills tested, and its decisions by kind."""
    return {f"eval/{GATE_KEY}/tested": len(summary["skills"]),
            **{f"eval/{GATE_KEY}/{kind}": n for kind, n in counts(decisions).items()}}


def figures(summary: dict) -> dict[str, float]:
    """The val summary's figures slime logs beside eval/shopsim_val (none that is undefined)."""
    out = {"success": summary["success"]["rate"], "strict": summary["strict"]["mean"],
           "loose": summary["loose"]["mean"], "scored": summary["n"], "infra_errors": summary["infra_errors"]}
    return {f"eval/{KEY}/{k}": v for k, v in out.items() if v is not None}
