"""Server-Sent Events of an instance's notifications (seedline.notify.<instance>).

The subscription is in place before the first byte goes out (a `: ready` comment),
so a client that has read it misses nothing published afterwards. A comment every
15 seconds keeps proxies from closing a quiet stream.
"""

from __future__ import annotations

import asyncio
import json
from typing import AsyncIterator

from starlette.requests import Request

from seedline_contracts import subjects

from .errors import WebError
from .tenant import Tenant

KEEPALIVE_SECONDS = 15.0
MAX_STREAMS = 200
QUEUE_SIZE = 1000


def sse_event(kind: str, body: dict) -> str:
    """One event; json.dumps keeps `data` on one line whatever the notice says, and the
    event name keeps only the characters a kind has."""
    name = "".join(c for c in kind if c.isascii() and (c.isalnum() or c == "_"))[:64]
    return f"event: {name or 'notice'}\ndata: {json.dumps(body, ensure_ascii=False)}\n\n"


async def notification_stream(web, tenant: Tenant, request: Request) -> AsyncIterator[str]:
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
        try:
            yield ": ready\n\n"
            while True:
                try:
                    data = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
                except TimeoutError:
                    if await request.is_disconnected():
                        return
                    yield ": keepalive\n\n"
                    continue
                try:
                    body = json.loads(data)
                except (ValueError, RecursionError):
                    continue
                if isinstance(body, dict):
                    yield sse_event(str(body.get("kind") or "notice"), body)
        finally:
            web.open_streams -= 1
            try:
                await sub.unsubscribe()
            except Exception:
                pass

    return events()
