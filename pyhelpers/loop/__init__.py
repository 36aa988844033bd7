"""The `pyhelpers run loop` process: one long-lived driver for the whole run.

loop (Loop: derive the next stage from disk, run it, restart transient failures), supervisor (the
restart rules table and limits), notify (webhook messages). The stages themselves are
pyhelpers/stages/, below this package.
"""
