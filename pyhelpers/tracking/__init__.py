"""W&B: the run's logging (wandb_log) and `make wandb-sync` (sync). What is still to be logged
after a crash reads every stage's results: pyhelpers/overview/wandb_pending.py.
"""
