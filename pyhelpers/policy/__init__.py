"""What the policy sees and how it is asked, shared by training rollouts and evaluation: the
system prompt (system_prompt), the token-level prompt builder (prompt_builder), the SGLang client
(sglang_client). Import-light: the rollout plugin loads these inside slime's Ray actors.
"""
