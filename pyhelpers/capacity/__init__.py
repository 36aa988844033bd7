"""Will it fit: the disk a round's saves and exports need (diskplan) and the guard that refuses a
stage that would not fit (diskguard); a training micro-batch's GPU memory (gpumem).
"""
