"""The foundation of one run, which every layer above may read: layout (every path of a run:
RUNS_DIR/<RUN>/ and TRAIN_SAVE/<RUN>/), checkpoints (Megatron saves: tracker, completeness,
rotation), events (events.jsonl), records (a stage's done-records), lock (one driver per run), stop
(make stop: ends what the pidfiles name), hints (a rehearsal's own commands in messages).
It imports no knob, stage or service: whole-run readers live in pyhelpers/overview/.
"""
