"""Request bodies larger than SEEDLINE_WEB_MAX_BODY_BYTES are refused with 413, naming
the limit, before they are read into memory: at once when Content-Length says so,
and as soon as a body sent without one grows past it."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from seedline_platform.logging import get_logger

from .errors import WebError

log = get_logger(__name__)


def body_too_large(limit: int) -> WebError:
    return WebError(
        "payload_too_large",
        f"The request body is over the limit of {limit:,} bytes (SEEDLINE_WEB_MAX_BODY_BYTES); "
        "send less at once, for example fewer entries per batch.",
    )


DRAIN_LIMIT_BYTES = 64 * 1024 * 1024


class BodyTooLarge(Exception):
    """Raised into the app when a body grows past the limit; the 413 below is the answer,
    so whatever the app makes of it is neither sent nor logged as a failure."""


class BodyLimit:
    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(scope, receive, send, more=True)
            return
        seen = 0
        over = False
        more = True
        started = False

        async def limited_receive() -> Message:
            nonlocal seen, over, more
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                more = message.get("more_body", False)
                if seen > self.limit:
                    over = True
                    raise BodyTooLarge()
            return message

        async def guarded_send(message: Message) -> None:
            # Once the body is too large, what the app says about the interrupted read (a
            # framework's 500) is not sent: the 413 below is the answer.
            nonlocal started
            if not over:
                started = started or message["type"] == "http.response.start"
                await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except BodyTooLarge:
            pass
        if over and not started:
            await self._refuse(scope, receive, send, more)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, more: bool) -> None:
        # A limit doing its work, not a failure: info, like every other limit.
        log.info("request_body_too_large", path=scope.get("path"), limit=self.limit)
        # The rest of the body is read and dropped (up to a bound) before answering: a
        # client still sending when the connection closes would not see the 413 at all.
        dropped = 0
        while more and dropped <= DRAIN_LIMIT_BYTES:
            message = await receive()
            if message["type"] != "http.request":
                break
            dropped += len(message.get("body", b""))
            more = message.get("more_body", False)
        error = body_too_large(self.limit)
        body = error.body()
        await send({"type": "http.response.start", "status": 413, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})
