"""Opens and relocations waiting for what the machine confirmed: one future per conversation.

The gateway records `opened`, `relocated` or `open_failed` in SEEDLINE_SESSIONS; a
plain subscription on those subjects wakes the waiting request at once. If the copy
of the resolver that holds the request misses it, the request still ends: the
projection stores the reply and the waiter looks there before giving up.
"""

from __future__ import annotations

import asyncio

from nats.aio.msg import Msg

from seedline_contracts.events import OpenFailed, Opened, Relocated, SessionEvent
from seedline_platform.lifecycle_events import reply_of

# The events that answer a waiting open or relocation.
SETTLING = (Opened, Relocated, OpenFailed)


class PendingOpens:
    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[bytes]] = {}

    def expect(self, session_id: str) -> asyncio.Future[bytes]:
        future = asyncio.get_running_loop().create_future()
        self._waiting[session_id] = future
        return future

    def forget(self, session_id: str) -> None:
        self._waiting.pop(session_id, None)

    async def settle(self, event: SessionEvent, msg: Msg | None = None) -> None:
        future = self._waiting.get(event.session_id)
        reply = reply_of(event)
        if future is not None and not future.done() and reply is not None:
            future.set_result(reply)
