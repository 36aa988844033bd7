"""The commands a hint names, for the run it is about.

A rehearsal is continued with `make rehearse RESUME=1` and looked at with `make <target>
REHEARSAL=1`; the real run's `make resume` / `make stop` / `make status` would act on the real
run's configuration instead. Hints are written once, in the real run's words, and rewritten here
where a rehearsal's lines are printed (the driver's console, make status, bin/train's last line).
"""

from __future__ import annotations

import re

# make targets that take REHEARSAL=1 (Makefile: IN_RUN)
_IN_RUN = ("stop", "status", "logs", "report", "plan", "watch", "migrate-pack")
_TARGET = re.compile(rf"\bmake ({'|'.join(_IN_RUN)})\b(?! REHEARSAL=1)")


def for_rehearsal(text: str) -> str:
    text = re.sub(r"\bmake resume\b", "make rehearse RESUME=1", text)
    text = re.sub(r"\bmake train\b", "make rehearse", text)
    text = re.sub(r"\bmake doctor\b(?! PROFILE=rehearse)", "make doctor PROFILE=rehearse", text)
    return _TARGET.sub(r"make \1 REHEARSAL=1", text)


def for_run(rehearsal: bool):
    """The rewrite for a run: for_rehearsal, or nothing."""
    return for_rehearsal if rehearsal else (lambda text: text)
