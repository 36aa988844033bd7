"""The ShopSimulator rollout plugin slime runs for every training episode (issue 5).

Imported by dotted path inside slime's RolloutManager Ray actor (PYTHONPATH carries the project):
`pyhelpers.rollout.rollout.generate_rollout` (--rollout-function-path) and
`pyhelpers.rollout.generate.generate` (--custom-generate-function-path). The flags the training
loop passes are in `flags.plugin_flags()`; the per-round YAML keys are in `settings`.
Modules: settings (YAML keys), flags, slime_compat (guarded slime imports), runtime (per-process
pools and caches), episode (one multi-turn episode), generate (slime's per-sample hook), retry
(full-skill retry + spool), metrics (rollout/shopsim/*), rollout (the per-step wrapper).
Nothing is imported here: slime imports the submodules it names.
"""
