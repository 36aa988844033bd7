"""One run's files and their control from any shell.

layout (every path of a run: RUNS_DIR/<RUN>/ and TRAIN_SAVE/<RUN>/), state (which stage comes next,
derived from the artifacts), manifest (run.json: the resolved configuration and what may change on
resume), lock (one driver per run), events (events.jsonl), checkpoints (Megatron saves: tracker,
completeness, rotation), stop (make stop), status (make status), plan (make plan), rehearsal (the
stand-in configuration of make rehearse). Nothing here starts a process except stop, which ends them.
"""
