"""Server-Sent Events of an instance's notices, from SEEDLINE_NOTICES (CONTRACT.md 1).

Each event's `id:` is the notice's stream sequence. A client that reconnects with
`Last-Event-ID` (every EventSource does) gets every notice after that one first, then
the rest as they come, so nothing is missed across a dropped connection or a restart
of this process. Without it the stream starts now. The reading consumer is in place
before the first byte goes out (a `: ready` comment). A comment every 15 seconds keeps
proxies from closing a quiet stream. The token is checked again every 2 seconds: a
stream ends within 5 seconds of its token's revocation. How many streams one token and
one address may hold is capped (stream_slots.py); the console's live pages are streams
of the same kind (console/live.py).
"""

from __future__ import annotations

import asyncio
import json
from typing import AsyncIterator, Awaitable, Callable

from starlette.requests import Request

from seedline_platform.logging import get_logger
from seedline_platform.notices import follow_notices

from .errors import WebError
from .fields import MAX_SEQ
from .tenant import Tenant

log = get_logger(__name__)

KEEPALIVE_SECONDS = 15.0
RECHECK_SECONDS = 2.0

StillAllowed = Callable[[], Awaitable[bool]]


def sse_event(kind: str, body: dict, event_id: int | str | None = None) -> str:
    """One event; json.dumps keeps `data` on one line whatever the notice says, and the
    event name keeps only the characters a kind has."""
    name = "".join(c for c in kind if c.isascii() and (c.isalnum() or c == "_"))[:64]
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {name or 'notice'}\ndata: {json.dumps(body, ensure_ascii=False)}\n\n"


def last_event_id(request: Request) -> int | None:
    """The `Last-Event-ID` a reconnecting client sends: a notice's id, or absent."""
    raw = request.headers.get("last-event-id", "").strip()
    if not raw:
        return None
    if not raw.isascii() or not raw.isdigit() or len(raw) > 19 or int(raw) > MAX_SEQ:
        raise WebError("invalid_request", "Last-Event-ID must be the id of a notice this stream "
                       "sent (a whole number); send the last one received, or none to start now.")
    return int(raw)


Source = AsyncIterator[str | None]


def client_of(request: Request) -> str:
    return request.client.host if request.client else "unknown"


async def sse_stream(web, request: Request, holder: str, still_allowed: StillAllowed,
                     source: Callable[[], Awaitable[Source]]) -> AsyncIterator[str]:
    """A stream of Server-Sent Events from `source` (each item an event's text, or None
    when there is nothing new), within the stream caps (stream_slots.py): `holder` is a
    digest of the token it counts against. `source()` returns once its consumers are in
    place, so nothing published after the `: ready` comment is missed."""
    slot = web.streams.take(holder, client_of(request))
    try:
        items = await source()
    except Exception as exc:
        web.streams.give_back(slot)
        if isinstance(exc, WebError):
            raise
        raise WebError("unavailable", "The notices cannot be read right now; try again in a "
                       "moment.") from exc

    async def events() -> AsyncIterator[str]:
        loop = asyncio.get_running_loop()
        checked = quiet_since = loop.time()
        try:
            yield ": ready\n\n"
            async for item in _until_broken(items):
                now = loop.time()
                if now - checked >= RECHECK_SECONDS:
                    checked = now
                    if not await _allowed(still_allowed):
                        return
                if item is None:
                    if now - quiet_since >= KEEPALIVE_SECONDS:
                        if await request.is_disconnected():
                            return
                        quiet_since = now
                        yield ": keepalive\n\n"
                    continue
                quiet_since = now
                yield item
        finally:
            web.streams.give_back(slot)
            await items.aclose()

    return events()


async def notification_stream(web, tenant: Tenant, request: Request, holder: str,
                              still_allowed: StillAllowed) -> AsyncIterator[str]:
    after = last_event_id(request)

    async def notices() -> Source:
        followed = follow_notices(tenant.backend.js, tenant.instance_id, after_seq=after,
                                  tick=RECHECK_SECONDS)
        try:
            await followed.__anext__()  # the consumer is in place
        except BaseException:
            await followed.aclose()
            raise
        return _as_events(followed)

    return await sse_stream(web, request, holder, still_allowed, notices)


async def _as_events(notices: AsyncIterator) -> Source:
    try:
        async for notice in notices:
            yield None if notice is None else sse_event(
                str(notice.notice.get("kind") or "notice"), notice.notice, notice.seq)
    finally:
        await notices.aclose()


async def _until_broken(notices: AsyncIterator) -> AsyncIterator:
    """The notices until NATS goes away; the client then reconnects with its
    Last-Event-ID and misses nothing."""
    try:
        async for notice in notices:
            yield notice
    except Exception as exc:
        log.warning("notices_stream_ended", error=f"{type(exc).__name__}: {exc}")


async def _allowed(still_allowed: StillAllowed) -> bool:
    """A token table that cannot be read right now does not end a stream; a revoked
    token does."""
    try:
        return await still_allowed()
    except Exception:
        return True
