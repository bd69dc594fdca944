"""How a FastStream JetStream handler acknowledges: retry_policy.py's policy, a message at
a time.

FastStream's default for JetStream terminates a message when its handler raises;
Seedline wants the opposite: an outage is waited out in place with the lease extended,
any other failure is redelivered a little later, and a message that fails on its last
delivery is parked in SEEDLINE_REJECTED with the reason and acknowledged, so the ones
behind it go on. The subscriber runs with ``AckPolicy.MANUAL``: this module acks.

A route that names its message type (routing.Route.message) has its payload decoded here,
at the edge: the handler is given the contract's type and the message (for its seq), and a
payload that is not that type is parked at once, since no redelivery makes it readable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from nats.aio.msg import Msg

from seedline_contracts.codec import decoder

from .consumer import Parker
from .logging import get_logger
from .outage import is_outage
from .retry_policy import failure_reason, gives_up, outage_pause, unreadable_reason, worn_out

log = get_logger(__name__)

MsgHandler = Callable[[Msg], Awaitable[None]]
RETRY_DELAY_SECONDS = 0.5


class Unreadable(Exception):
    """The payload is not the route's message type."""


def typed(kind: type, handle: Callable[[Any, Msg], Awaitable[None]]) -> MsgHandler:
    """`handle(event, msg)` with the payload decoded into `kind`; Unreadable when it is not."""
    decode = decoder(kind).decode

    async def typed_handle(msg: Msg) -> None:
        try:
            event = decode(msg.data)
        except msgspec.MsgspecError as exc:
            raise Unreadable(unreadable_reason(kind, exc)) from None
        await handle(event, msg)

    return typed_handle


async def handle_with_redelivery(
    msg: Msg, handle: MsgHandler, park: Parker, max_deliver: int
) -> None:
    """Run `handle` on one JetStream message and settle the message accordingly."""
    delivered = msg.metadata.num_delivered
    if (worn := worn_out(msg, max_deliver)) is not None:
        await park(msg, worn)
        await _settle(msg.ack)
        return
    waits = 0
    while True:
        try:
            await handle(msg)
            break
        except asyncio.CancelledError:
            raise
        except Unreadable as exc:
            log.error("message_parked", subject=msg.subject, error=str(exc))
            await park(msg, str(exc)[:500])
            break
        except Exception as exc:
            if is_outage(exc):
                log.warning("handler_waiting_for_outage", subject=msg.subject, error=str(exc))
                await _settle(msg.in_progress)
                await asyncio.sleep(outage_pause(waits))
                waits += 1
                continue
            if gives_up(delivered, max_deliver):
                log.error("message_parked", subject=msg.subject, error=repr(exc))
                await park(msg, failure_reason(delivered, exc))
                break
            log.exception("handler_failed", subject=msg.subject, delivered=delivered)
            await _settle(lambda: msg.nak(delay=RETRY_DELAY_SECONDS))
            return
    await _settle(msg.ack)


async def _settle(action: Callable[[], Awaitable[object]]) -> None:
    try:
        await action()
    except Exception as exc:
        # A lost ack means a redelivery, which every handler treats as a no-op.
        log.warning("ack_failed", error=str(exc))
