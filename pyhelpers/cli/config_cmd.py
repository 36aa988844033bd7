"""`pyhelpers config show|check|export`."""

from __future__ import annotations

import json
import os
import shlex
import sys

import click

from pyhelpers.config import declarations, handed, load
from pyhelpers.config.check import check
from pyhelpers.config.load import Config
from pyhelpers.doctor.base import TERMINAL, WIDTH, wrap


def _problems_or_exit(cfg: Config) -> None:
    """Each problem on stderr; exit 1 when one is an error."""
    problems = check(cfg)
    errors = [p for p in problems if p.level == "error"]
    if errors:
        problems.append(f"Error: {len(errors)} configuration error(s) above; fix them in {cfg.env_file} or on the "
                        "make command line (defaults: env/defaults.env)")
    width = _terminal_width()
    for p in problems:
        click.echo("\n".join(wrap(str(p), rest="  ", width=width)) if width else str(p), err=True)
    if errors:
        raise click.exceptions.Exit(1)


def _terminal_width() -> int | None:
    """Where stderr is a terminal (the first screen of `make train` on a fresh machine, issue 40),
    its width, at most the doctor's: a problem of 430 characters is wrapped there. None for a pipe
    or a file (a log, a script, a test), where each problem stays on one line for grep."""
    try:
        if not os.isatty(sys.stderr.fileno()):
            return None
        return min(os.get_terminal_size(sys.stderr.fileno()).columns or TERMINAL, WIDTH)
    except (OSError, ValueError, AttributeError):  # no real file behind stderr (e.g. click's test runner)
        return None


@click.group()
def config():
    """The resolved configuration (env/defaults.env < .env < environment)."""


@config.command("show")
@click.option("--json", "as_json", is_flag=True, help="One JSON object, for machines.")
def config_show(as_json):
    """Print every knob with its value and where it came from; secrets as ***.

    \b
    Example:
      pyhelpers config show
      NUM_GPUS=1 pyhelpers config show --json
    """
    cfg = load.load()
    public = cfg.public()
    if as_json:
        click.echo(json.dumps({"values": public, "sources": cfg.sources}, indent=2, sort_keys=True))
        return
    width = max(len(k) for k in public)
    for name, value in public.items():
        click.echo(f"{name:<{width}}  {value:<40}  [{cfg.sources[name]}]")


@config.command("check")
def config_check():
    """Validate the configuration; exit 1 naming each bad variable and its fix.

    \b
    Example:
      NUM_GPUS=3 TP_SIZE=2 pyhelpers config check
    """
    cfg = load.load()
    _problems_or_exit(cfg)
    click.echo(f"config ok: run {cfg.run_name}, {cfg.NUM_GPUS} GPU(s), TP={cfg.TP_SIZE}")


def _for_bash(cfg: Config, with_secrets: bool) -> dict[str, str]:
    """What bash gets: the derived values (RUN_DIR, SAVE_DIR, ...), .env's extra entries, the knobs
    declared `bash` (facts.py: bin/train, bin/rehearse, bin/lib.sh, bin/in-env, bin/install-hooks
    read them) and, when asked, the secrets. Every other knob reaches the processes bash starts in
    the configuration handed on (HANDED_VAR), not as a variable of its own."""
    secrets, knobs = cfg.secret_names, declarations.read_knobs()
    return {name: value for name, value in cfg.process_env(secrets=with_secrets).items()
            if name not in knobs or knobs[name].has("bash") or name in secrets}


@config.command("export")
@click.option("--with-secrets", is_flag=True,
              help="Include secret values (for a shell that runs a key's user itself; never redirect this "
                   "to a file). bin/train does not: the driver reads the keys from .env.")
def config_export(with_secrets):
    """Print a validated `export NAME='value'` block for bash to eval (no re-parsing in bash): the
    derived values (RUN_DIR, SAVE_DIR, ...), .env's extra entries, the knobs bash reads (declared
    `bash`), and SHOPSIMRL_CONFIG: what env/defaults.env and .env hold, read once for the processes
    bash starts, which take it from there instead of reading the files again (config/handed.py).

    Secrets are left out unless --with-secrets; their values then travel only through the pipe
    into the shell's environment, never through argv or a file. The run's scripts leave them out:
    every process a shell exports them to holds them (pyhelpers/launch/secret_env.py).
    SHOPSIMRL_CONFIG never holds one: a process reads a secret where it lives (.env).

    \b
    Example:
      eval "$(pyhelpers config export)"
    """
    cfg, handed_on = load.start()
    _problems_or_exit(cfg)
    lines = [f"export {name}={shlex.quote(value)}" for name, value in _for_bash(cfg, with_secrets).items()]
    lines.append(f"export {handed.HANDED_VAR}={shlex.quote(handed_on)}")
    sys.stdout.write("\n".join(lines) + "\n")


@config.command("docs")
def config_docs():
    """Print the knob reference as a Markdown table (the README's knob section is this output).

    \b
    Example:
      pyhelpers config docs
    """
    section = None
    for knob in declarations.read_knobs().values():
        if knob.section != section:
            section = knob.section
            click.echo(f"\n**{section}**\n\n| knob | default | type and range | what |\n|---|---|---|---|")
        default = f"`{knob.default}`" if knob.default else "(empty)"
        kind = f"`{knob.type.text}`".replace("|", "\\|") if knob.type else "?"
        click.echo(f"| `{knob.name}` | {default} | {kind} | {knob.doc.replace('|', '/')} |")


@config.command("knobs-module")
def config_knobs_module():
    """Print pyhelpers/config/knobs.py as generated from env/defaults.env (make readme-knobs writes it).

    \b
    Example:
      pyhelpers config knobs-module > pyhelpers/config/knobs.py
    """
    from pyhelpers.config import generate  # local: only this maintenance command needs the generator

    sys.stdout.write(generate.source(declarations.parse_knobs(declarations.DEFAULTS_FILE),
                                     declarations.digest(declarations.DEFAULTS_FILE)))
