"""The `pyhelpers` command: a root group whose sub-groups load only when called.

Loading lazily keeps `pyhelpers config ...` fast (architecture §10: < 300 ms) even though other
groups import jsonschema or wandb. GROUPS is the one place the CLI's groups are declared: to add a
group, write pyhelpers/cli/<name>_cmd.py with a click group and add one line here. A group whose
commands span several modules (`run`) lists them all; each module holds a click group of that name
with its share of the commands, merged on first use (no module imports another to register).
"""

from __future__ import annotations

import importlib

import click

from pyhelpers.errors import ToolkitError

# command name -> (module(s), attribute, one-line help shown by `pyhelpers --help`)
GROUPS: dict[str, tuple[str | tuple[str, ...], str, str]] = {
    "config": ("pyhelpers.cli.config_cmd", "config", "Show, check and export the resolved configuration."),
    "doctor": ("pyhelpers.cli.doctor_cmd", "doctor", "Preflight this machine (PASS/WARN/FAIL/SKIP per check)."),
    "data": ("pyhelpers.cli.data_cmd", "data", "Task files: build train/val from ShopSimulator's dataset, check them."),
    "plan": ("pyhelpers.cli.plan_cmd", "plan", "Plan a launch without starting anything (e.g. memory)."),
    "proc": ("pyhelpers.cli.proc_cmd", "proc", "Start, stop and wait for services in their own process groups; the run lock."),
    "analyst": ("pyhelpers.cli.analyst_cmd", "analyst", "Failure Analyst sidecar: spool records -> candidate skills."),
    "shopsim": ("pyhelpers.cli.shopsim_cmd", "shopsim", "Ask a running ShopSimulator: the no-slot probe, release all slots."),
    "run": (("pyhelpers.cli.run_cmd", "pyhelpers.cli.run_ops_cmd", "pyhelpers.cli.run_stage_cmd"), "run",
            "Where a run stands and what the driver does next."),
    "skillbank": ("pyhelpers.cli.skillbank_cmd", "skillbank", "SkillBank: compile, inject gate decisions, show, diff, render."),
    "eval": ("pyhelpers.cli.eval_cmd", "eval_group", "Evaluate a round: bare val, then the random-masked gate."),
    "node": ("pyhelpers.cli.node_cmd", "node", "A worker machine of a multi-node run: join, leave, status."),
    "migrate": ("pyhelpers.cli.migrate_cmd", "migrate", "Move a run to a new machine: pack here, fetch and verify there."),
}


def load_group(name: str) -> click.Group:
    """GROUPS[name] as one click group: its module's, or the union of its modules' commands."""
    modules, attr, _ = GROUPS[name]
    if isinstance(modules, str):
        return getattr(importlib.import_module(modules), attr)
    parts = [getattr(importlib.import_module(m), attr) for m in modules]
    commands: dict[str, click.Command] = {}
    for part in parts:
        twice = sorted(set(commands) & set(part.commands))
        if twice:  # a programming error: two modules would silently shadow each other's command
            raise RuntimeError(f"`pyhelpers {name}`: command(s) {twice} defined in more than one of {modules}")
        commands.update(part.commands)
    return click.Group(name, commands=commands, help=parts[0].help)


class LazyGroup(click.Group):
    """A group that imports a sub-command's module on first use and turns ToolkitError into
    a click error (exit 1) whose message names the thing and the fix."""

    def list_commands(self, ctx):
        return sorted(GROUPS)

    def get_command(self, ctx, name):
        if name not in GROUPS:
            return None
        return load_group(name)

    def format_commands(self, ctx, formatter):
        rows = [(name, GROUPS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except ToolkitError as exc:
            raise click.ClickException(str(exc)) from exc


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="shopsimrl-pyhelpers", prog_name="pyhelpers")
def main():
    """ShopSimRL helpers: the decisions behind the Makefile and bin/ scripts.

    \b
    Example:
      pyhelpers config check
    """
