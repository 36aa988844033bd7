"""Readers of a whole run, above the loop: status (make status), plan (make plan), manifest
(run.json: the resolved configuration and what may change on resume), rehearsal (the stand-in
configuration of make rehearse), wandb_pending (what W&B still lacks after a crash).
"""
