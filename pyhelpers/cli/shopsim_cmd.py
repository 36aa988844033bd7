"""`pyhelpers shopsim probe|release-all`: what the driver asks a running ShopSimulator."""

from __future__ import annotations

import asyncio

import click

from pyhelpers.errors import ToolkitError


async def _call(url: str, what: str):
    # lazy: shopsim.client (httpx, ~70 ms) only for the shopsim commands
    from pyhelpers.shopsim.answers import unusable_server
    from pyhelpers.shopsim.client import ShopSimClient, ShopSimError
    from pyhelpers.shopsim.protocol import UnusableServer

    try:
        async with ShopSimClient(url) as client:
            return await (client.probe() if what == "probe" else client.release_all())
    except UnusableServer as exc:
        raise unusable_server(exc, url) from None
    except ShopSimError as exc:
        raise ToolkitError(f"ShopSimulator did not answer {what}: {exc}", url,
                           "check logs/shopsim.log; `make doctor` shows who holds SHOPSIM_PORT") from None


@click.group()
def shopsim():
    """A running ShopSimulator (pack_api protocol)."""


@shopsim.command("probe")
@click.option("--url", required=True, help="Base URL, e.g. http://127.0.0.1:5700.")
def shopsim_probe(url):
    """Exit 0 when ShopSimulator answers the no-slot probe (it takes no slot), else 1.

    \b
    Example:
      pyhelpers shopsim probe --url http://127.0.0.1:5700
    """
    if not asyncio.run(_call(url, "probe")):
        raise SystemExit(1)
    click.echo("ShopSimulator is up")


@shopsim.command("release-all")
@click.option("--url", required=True, help="Base URL, e.g. http://127.0.0.1:5700.")
def shopsim_release_all(url):
    """Free every slot (only when the run owns the simulator and nothing is playing).

    \b
    Example:
      pyhelpers shopsim release-all --url http://127.0.0.1:5700
    """
    click.echo(asyncio.run(_call(url, "release-all")))
