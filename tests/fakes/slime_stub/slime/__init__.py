"""A minimal stand-in of slime (THUDM/slime v0.3.1, 624b824) for tests and `make rehearse`.

Only the pieces the rollout plugin touches, with slime's module paths, class names, field names
and call order, written from reading slime's source (not copied). Put tests/fakes/slime_stub first
on sys.path. Stdlib only (no torch): slime's `Sample` keeps its fields and `Status` values.
"""
