"""OS primitives that know nothing of runs: process groups with pidfiles (groups), /proc readers
(procfs), ports and their holders (ports), readiness waits (ready).
"""
