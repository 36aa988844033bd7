"""Task files: reading and checking the train/val JSONL (files) and `pyhelpers data build` from
ShopSimulator's dataset (build).
"""
