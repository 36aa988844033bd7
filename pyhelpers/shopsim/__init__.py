"""ShopSimulator's HTTP protocol (`protocol`, transport-free) and an async client on it (`client`).

Both are imported by the rollout plugin inside slime's environment: stdlib + httpx only.
Facts the code relies on, with the fork and commit they were read from: docs/shopsim_protocol.md.
"""
