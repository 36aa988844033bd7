"""Evaluation: bare val and the random-masked gate, played against ShopSimulator on SGLang.

Modules by concern (this file imports nothing, so `pyhelpers --help` stays fast):
  settings   EvalSettings: the knob values an evaluation runs with (read once, in the CLI)
  episode    one episode (turn loop on the shared prompt builder) and its infra-error retries
  records    episodes.jsonl: append one fsynced line per episode, read it back (torn line dropped)
  slots      the ledger of ShopSimulator slots held, and its clean-up on resume
  progress   the progress line on stderr
  runner     EVAL_CONCURRENCY episodes in flight, resumable by episode id
  stats      Wilson and mean confidence intervals, the val summary
  val        `pyhelpers eval val`: the VAL_TASKS split, no skills
  gate       `pyhelpers eval gate`: plan, play, estimate, decide (pyhelpers.gate)
  wandb_val  the val figures in W&B (job_type val), logged once
Written up in docs/runtime_eval.md; metric names in docs/training_monitoring.md.
"""
