"""What each stage of a round does: train (services + the slime job + the analyst), export (the
HF conversion and the atomic `hf` flip), evaluate (the eval server, bare val, the gate).
"""
