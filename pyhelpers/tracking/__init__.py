"""W&B: the run's logging (wandb_log), what is still to be logged after a crash (pending),
and `make wandb-sync` (sync).
"""
