"""Opens waiting for their outcome: one future per conversation id.

The gateway records `opened` or `open_failed` in SEEDLINE_SESSIONS; a plain
subscription on those subjects wakes the waiting request at once. If the copy of
the resolver that holds the request misses it, the request still ends: the
projection stores the reply and the waiter looks there before giving up.
"""

from __future__ import annotations

import asyncio

import msgspec
from nats.aio.msg import Msg

from seedline_contracts.codec import encode
from seedline_contracts.events import OpenFailed, Opened, SessionEvent

_decoder = msgspec.json.Decoder(SessionEvent)


class PendingOpens:
    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[bytes]] = {}

    def expect(self, session_id: str) -> asyncio.Future[bytes]:
        future = asyncio.get_running_loop().create_future()
        self._waiting[session_id] = future
        return future

    def forget(self, session_id: str) -> None:
        self._waiting.pop(session_id, None)

    async def on_event(self, msg: Msg) -> None:
        try:
            event = _decoder.decode(msg.data)
        except msgspec.MsgspecError:
            return
        future = self._waiting.get(event.session_id)
        if future is None or future.done():
            return
        if isinstance(event, Opened):
            future.set_result(encode(event.reply))
        elif isinstance(event, OpenFailed):
            future.set_result(encode({"ok": False, "error": event.error}))
