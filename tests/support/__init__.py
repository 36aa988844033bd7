"""Helpers shared by the tests (not tests themselves): rehearsal runs and their assertions
(rehearsal), the evaluation world (eval_world), the rollout plugin's stack of stand-ins
(rollout_stack), analyst records (analyst), SkillBank builders (skillbank), the test tokenizer
(tokenizer), loopback HTTP replies (http), a tmux pane for terminal tests (tmux), and
proc_driver.sh (a bash driver for the run-lock tests). pytest puts tests/ on
sys.path, so tests import them as `support.<name>`.
"""
