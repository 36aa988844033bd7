"""The Failure Analyst sidecar (skillbank.md, Flow step 2): spool records -> analyst model ->
candidates/<batch_id>.json, exactly once per record across crashes. See docs/analyst.md.

Modules: ``budget`` (stop/deadline clock, rate and spend caps), ``client`` (OpenAI-compatible
HTTP with retries), ``ledger`` (spool scan, quarantine, ledger, batching, lock), ``prompt``
(prompt text and reply parsing), ``stats`` (counters, W&B), ``sidecar`` (the loop).
"""
