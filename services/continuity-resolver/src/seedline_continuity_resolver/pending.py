"""Opens and relocations waiting for what the machine confirmed: one future per conversation.

The gateway records `opened`, `relocated` or `open_failed` in SEEDLINE_SESSIONS; a
plain subscription on those subjects wakes the waiting request at once. If the copy
of the resolver that holds the request misses it, the request still ends: the
projection stores the reply and the waiter looks there before giving up.
"""

from __future__ import annotations

import asyncio

import msgspec

from seedline_contracts.codec import encode
from seedline_contracts.events import OpenFailed, Opened, Relocated, SessionEvent

_decoder = msgspec.json.Decoder(SessionEvent)
SETTLING = ("opened", "relocated", "open_failed")


def reply_of(event: object) -> bytes | None:
    """The answer an event settles a waiting request with, or None."""
    if isinstance(event, Opened):
        return encode(event.reply)
    if isinstance(event, Relocated) and event.reply is not None:
        return encode(event.reply)
    if isinstance(event, OpenFailed):
        return encode({"ok": False, "error": event.error})
    return None


class PendingOpens:
    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[bytes]] = {}

    def expect(self, session_id: str) -> asyncio.Future[bytes]:
        future = asyncio.get_running_loop().create_future()
        self._waiting[session_id] = future
        return future

    def forget(self, session_id: str) -> None:
        self._waiting.pop(session_id, None)

    def settle(self, data: bytes) -> None:
        try:
            event = _decoder.decode(data)
        except msgspec.MsgspecError:
            return
        future = self._waiting.get(event.session_id)
        reply = reply_of(event)
        if future is not None and not future.done() and reply is not None:
            future.set_result(reply)
