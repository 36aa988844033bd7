"""What the command modules share: the configuration with its run layout, and progress on stderr
(stdout stays for data)."""

from __future__ import annotations

import click


def ctx():
    """(config, run layout) of the current configuration; a bad knob raises, naming it."""
    # local: every command module imports this file; config's loader only loads when a command runs
    from pyhelpers.config import load
    from pyhelpers.config.check import not_a_directory
    from pyhelpers.errors import ToolkitError
    from pyhelpers.run.layout import from_config

    cfg = load.load()
    if why := not_a_directory(cfg, "RUNS_DIR"):  # every run command reads under it: one line, not a traceback
        raise ToolkitError(why)
    return cfg, from_config(cfg)


def echo_err(line: str) -> None:
    click.echo(line, err=True)
