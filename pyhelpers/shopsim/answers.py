"""What an answer of ShopSimulator (or of whatever listens at its address) means to the client
(client.py): whether a probe found the simulator, another program or the simulator refusing,
and whether a failed request may have taken or freed a slot. Stdlib only at import: the rollout
plugin uses the client inside slime's environment.
"""

from __future__ import annotations

import asyncio

from pyhelpers.errors import ToolkitError
from pyhelpers.shopsim import protocol

NOT_SHOPSIM_FIX = ("another program answers there (`make doctor` names the holder of SHOPSIM_PORT): stop it, or "
                   "point SHOPSIM_HOST/SHOPSIM_PORT (or --shopsim) at ShopSimulator")


def unusable_server(exc: protocol.UnusableServer, url: str) -> ToolkitError:
    """The error for a probe answered by a server that will not serve this client (another program,
    or ShopSimulator answering with an error): waiting for it to become ready
    (SHOPSIM_START_TIMEOUT) would only delay the same answer."""
    return ToolkitError(str(exc), url, exc.fix)


def unusable_error_answer(exc: protocol.HTTPStatusError) -> protocol.UnusableServer:
    """A probe answered with an HTTP error (pack_api itself always says 200): the simulator's own
    Flask error page (or the fence's header) is a refusal; anything else is another program."""
    if exc.from_shopsim:
        return protocol.ShopSimRefused(f"ShopSimulator answered with an error: {exc.detail}",
                                fix=protocol.refused_fix(exc.status), action="probe")
    return protocol.NotShopSim(f"{exc.detail} — the server at this address is not ShopSimulator "
                        f"(no {protocol.API_PATH})", fix=NOT_SHOPSIM_FIX, action="probe")


def not_shopsim(exc: protocol.ShopSimError) -> protocol.NotShopSim:
    """A probe answered with something that is not pack_api's (HTTP 200 that is not JSON, or JSON
    without pack_api's `result`)."""
    return protocol.NotShopSim(f"{exc.detail} — the server at this address is not ShopSimulator",
                        fix=NOT_SHOPSIM_FIX, action="probe")


def probe_answered(body) -> bool:
    """True for pack_api's answer to the no-slot probe; any other answer raises UnusableServer."""
    try:
        protocol.result_of(body, "probe")
    except protocol.ProbeOK:
        return True
    except protocol.ShopSimError as exc:
        if exc.server_message is None:  # no pack_api `result`
            raise not_shopsim(exc) from None
        raise protocol.ShopSimRefused(f"ShopSimulator answered with an error: {exc.detail}",
                               fix=protocol.refused_fix(200, exc.server_message), action="probe",
                               server_message=exc.server_message) from None
    raise protocol.NotShopSim(f"an answer that is not pack_api's to its probe: {str(body)[:200]}", fix=NOT_SHOPSIM_FIX,
                       action="probe")


def may_have_freed(exc: BaseException | None) -> bool:
    """An interact answered by a server error may have freed its slot first: pack_api frees on
    `over` (pack_api.py:112-113) before the answer can fail (:120), and a gate's 502 may hide it."""
    return isinstance(exc, protocol.HTTPStatusError) and exc.status >= 500


def refused(request: asyncio.Task | None) -> bool:
    """The reset was answered "no free slot": the one failure that certainly took no slot."""
    return request is not None and request.done() and not request.cancelled() \
        and isinstance(request.exception(), protocol.NoSlotError)
