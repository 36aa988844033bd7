"""`pyhelpers migrate pack|machine`: move a run to a new machine with nothing lost (pyhelpers/migrate)."""

from __future__ import annotations

import os

import click

from pyhelpers.capacity.diskplan import gb
from pyhelpers.cli.common import ctx, echo_err
from pyhelpers.errors import ToolkitError


@click.group()
def migrate():
    """Move a run to a new machine: pack it here, fetch and verify it there."""


@migrate.command("pack")
def migrate_pack():
    """On the old machine: the manifest (relative paths, sizes, BLAKE2b) and a pack tree of
    hardlinks of what the run needs (pyhelpers/migrate/pack.py). Prints the FROM to give
    `make migrate-machine` on the new machine.

    \b
    Example:
      pyhelpers migrate pack
    """
    # lazy: migrate.pack (~87 ms) only for this command
    from pyhelpers.migrate import pack

    cfg, lay = ctx()
    out = pack.pack(cfg, lay, progress=echo_err)
    m = pack.load_manifest(out)
    for item in m["recreate"]:
        echo_err(f"not packed: {item['what']} -> {item['command']}")
    click.echo(f"packed run {cfg.run_name}: {len(m['files'])} files, {gb(m['total_bytes'])} in {out}")
    click.echo(f"on the new machine: make migrate-machine FROM=root@<this machine>:{out}  (or a mounted copy of it)")


@migrate.command("machine")
@click.option("--from", "from_", default="", help="The pack dir: user@host:/path or /mounted/path.")
@click.option("--profile", default=None, help="Doctor profile of the checks [default: DOCTOR_PROFILE].")
def migrate_machine(from_, profile):
    """On the new machine: check it, copy the pack with rsync (resumable), verify every hash,
    place everything at this configuration's paths, check data/models/W&B/.env/configuration,
    and print the `make resume` that continues the run (pyhelpers/migrate/fetch.py).
    Exit 0 ready; 3 copied and verified but TODO lines first; 1 stopped.

    \b
    Example:
      pyhelpers migrate machine --from root@old-host:/root/autodl-tmp/shopsimrl/runs/.migration/myrun
    """
    # lazy: migrate.fetch (~80 ms) only for this command
    from pyhelpers.migrate import fetch

    if not from_:
        raise ToolkitError("FROM is not set", "make migrate-machine FROM=...",
                           "give the pack dir that make migrate-pack printed on the old machine, e.g. "
                           "make migrate-machine FROM=root@old-host:/root/autodl-tmp/shopsimrl/runs/.migration/<RUN>")
    cfg, lay = ctx()
    raise SystemExit(fetch.migrate(cfg, lay, from_=from_, environ=dict(os.environ),
                                   profile=profile or cfg.DOCTOR_PROFILE or "full", echo=echo_err))
