"""`make doctor`: the preflight of a new or migrated machine, one module per check family.

Every check is `check(ctx) -> list[Result]` (base.py); runner.py lists them, applies the rehearse
profile and DOCTOR_SKIP, and turns anything a check raises into a FAIL line naming it.
"""
