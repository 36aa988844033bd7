"""The one exception type library code raises for problems a user can fix.

Its message follows the project's convention: ``<what is wrong>: <where> (<how to fix>)``.
The CLI turns it into a click error (exit 1); library code never prints or exits.
"""

from __future__ import annotations


class ToolkitError(Exception):
    """A problem the user can act on: what went wrong, where, and the fix."""

    def __init__(self, what: str, where: str = "", fix: str = ""):
        self.what, self.where, self.fix = what, where, fix
        text = what
        if where:
            text += f": {where}"
        if fix:
            text += f" ({fix})"
        super().__init__(text)


class Stopped(SystemExit):
    """TERM or INT reached the training loop (make stop, Ctrl-C): it leaves, and each stage stops
    what it started on the way out. A SystemExit, not an Exception: the signal handler raises it
    wherever the main thread is, and an `except Exception` there (a job API call that may hiccup, a
    node list the busy head may not answer) took a stop for one more failed call and went on -- the
    stop lost, the round training on until `make stop` SIGKILLed the driver. And SystemExit, not
    any BaseException: asyncio keeps every other exception of a task until something awaits that
    task, so a stop landing in an evaluation's episode writer surfaced only after its last episode;
    SystemExit (with KeyboardInterrupt, which pytest and click take for the user's ^C) leaves the
    event loop at once. run_loop turns it into exit 143 (130 for SIGINT)."""
