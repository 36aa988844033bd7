"""The random-masked gate: masks, plan, estimator, decision rule, report, W&B logging.

Modules by concern (import the one you need; this file imports nothing, so the rollout plugin
and fast CLI commands do not pay for numpy or wandb):
  masks      hash-seeded mask bits (stdlib)
  plan       the foldover plan of one round (stdlib)
  dist       t / normal distribution functions (stdlib)
  estimate   pair-difference regression, HC3 errors, balance and additivity checks (numpy)
  decide     pooling over rounds, Bonferroni decisions, MDE
  report     summary dict for gate/summary.json and the human-readable report
  simulate   a seeded outcome simulator with known effects (tests and bench/)
  wandb_log  log_gate(): the gate's W&B figures, once per round
The method is written up in docs/gate.md.
"""
