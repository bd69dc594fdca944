"""Connection limits the ASGI app cannot see: how long a client may take to send its
request's headers, and how many connections one client address may hold open.

uvicorn times out only an idle keep-alive connection; a client that opens a connection
and sends half a request line (or nothing) holds it for ever, and a few hundred such
connections starve everyone else. Both limits live here, in uvicorn's own h11 protocol,
because nothing reaches the app before the headers are complete.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from seedline_platform.logging import get_logger

from .errors import WebError

log = get_logger(__name__)


def _busy_reply(limit: int) -> bytes:
    body = WebError("unavailable", f"This address already holds {limit} open connections to "
                    "Seedline (SEEDLINE_WEB_MAX_CONNECTIONS_PER_CLIENT); close some and try "
                    "again.").body()
    return (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
            b"connection: close\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n"
            + body)


def guarded_protocol(header_timeout: float, per_client: int) -> type[H11Protocol]:
    """An H11Protocol class with both limits; one count of open connections per class."""
    open_by_client: Counter[str] = Counter()

    class GuardedH11Protocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None
        _counted: str | None = None

        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            host = self.client[0] if self.client else "unknown"
            if open_by_client[host] >= per_client:
                log.info("connection_refused", client=host, reason="too_many_connections",
                            limit=per_client)
                transport.write(_busy_reply(per_client))
                transport.close()
                return
            open_by_client[host] += 1
            self._counted = host
            self._watch_headers()

        def connection_lost(self, exc) -> None:
            if self._counted is not None:
                open_by_client[self._counted] -= 1
                if open_by_client[self._counted] <= 0:
                    del open_by_client[self._counted]
                self._counted = None
            self._stop_header_timer()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._watch_headers()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._watch_headers()

        # -- the header deadline ------------------------------------------------------

        def _waiting_for_headers(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _watch_headers(self) -> None:
            """Armed while the connection waits for a request's headers (the first, or the
            next on a keep-alive connection), disarmed once they are complete."""
            if self.transport is None or self.transport.is_closing():
                self._stop_header_timer()
            elif not self._waiting_for_headers():
                self._stop_header_timer()
            elif self._header_timer is None:
                self._header_timer = self.loop.call_later(header_timeout, self._headers_late)

        def _stop_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            if self.transport.is_closing() or not self._waiting_for_headers():
                return
            log.info("connection_closed", client=self._counted,
                     reason="request headers not complete in time",
                     timeout_seconds=header_timeout)
            try:
                self.conn.send(h11.ConnectionClosed())
            except h11.LocalProtocolError:
                pass
            self.transport.close()

    return GuardedH11Protocol
