"""Server-Sent Events of an instance's notifications (seedline.notify.<instance>).

The subscription is in place before the first byte goes out (a `: ready` comment),
so a client that has read it misses nothing published afterwards. A comment every
15 seconds keeps proxies from closing a quiet stream. The token is checked again
every 2 seconds: a stream ends within 5 seconds of its token's revocation.
"""

from __future__ import annotations

import asyncio
import json
from typing import AsyncIterator, Awaitable, Callable

from starlette.requests import Request

from seedline_contracts import subjects

from .errors import WebError
from .tenant import Tenant

KEEPALIVE_SECONDS = 15.0
RECHECK_SECONDS = 2.0
MAX_STREAMS = 200
QUEUE_SIZE = 1000


def sse_event(kind: str, body: dict) -> str:
    """One event; json.dumps keeps `data` on one line whatever the notice says, and the
    event name keeps only the characters a kind has."""
    name = "".join(c for c in kind if c.isascii() and (c.isalnum() or c == "_"))[:64]
    return f"event: {name or 'notice'}\ndata: {json.dumps(body, ensure_ascii=False)}\n\n"


StillAllowed = Callable[[], Awaitable[bool]]


async def notification_stream(web, tenant: Tenant, request: Request,
                              still_allowed: StillAllowed) -> AsyncIterator[str]:
    if web.open_streams >= MAX_STREAMS:
        raise WebError("unavailable", f"This web process already serves {MAX_STREAMS} "
                       "notification streams; close one or try again later.")
    queue: asyncio.Queue = asyncio.Queue(QUEUE_SIZE)

    async def on_message(msg) -> None:
        if not queue.full():  # a reader this far behind loses the oldest news, not the process
            queue.put_nowait(msg.data)

    nc = tenant.backend.nc
    sub = await nc.subscribe(subjects.notify_subject(tenant.instance_id), cb=on_message)
    await nc.flush()
    web.open_streams += 1

    async def events() -> AsyncIterator[str]:
        loop = asyncio.get_running_loop()
        checked = quiet_since = loop.time()
        try:
            yield ": ready\n\n"
            while True:
                try:
                    data = await asyncio.wait_for(queue.get(), RECHECK_SECONDS)
                except TimeoutError:
                    data = None
                now = loop.time()
                if now - checked >= RECHECK_SECONDS:
                    checked = now
                    if not await _allowed(still_allowed):
                        return
                if data is None:
                    if now - quiet_since >= KEEPALIVE_SECONDS:
                        if await request.is_disconnected():
                            return
                        quiet_since = now
                        yield ": keepalive\n\n"
                    continue
                try:
                    body = json.loads(data)
                except (ValueError, RecursionError):
                    continue
                if isinstance(body, dict):
                    quiet_since = now
                    yield sse_event(str(body.get("kind") or "notice"), body)
        finally:
            web.open_streams -= 1
            try:
                await sub.unsubscribe()
            except Exception:
                pass

    return events()


async def _allowed(still_allowed: StillAllowed) -> bool:
    """A token table that cannot be read right now does not end a stream; a revoked
    token does."""
    try:
        return await still_allowed()
    except Exception:
        return True
