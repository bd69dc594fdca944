"""What happens to a request before any route reads it: the bearer token is checked
before the body is read, the whole body has a deadline, and a client that goes away
in the middle of its body is an event of its own (499), never a server error.

Order, outermost first: BodyDeadline, TokenFirst, then the body limit (limits.py). So
a large body without a token is 401, not 413: nobody unknown gets the server to read
megabytes, or even to say how much it would read.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from seedline_platform.logging import get_logger

from .errors import WebError
from .limits import DRAIN_LIMIT_BYTES

log = get_logger(__name__)

# The paths a bearer token guards (the console has its own login, the docs are public).
GUARDED_PREFIXES = ("/v1/", "/mcp")
# Starlette's ClientDisconnect becomes this status: the client closed the connection
# before the server could answer (nginx's 499), so nothing is sent and nothing failed.
CLIENT_CLOSED = 499

InstanceOf = Callable[[str | None], Awaitable[str]]


def _guarded(path: str) -> bool:
    return path == "/mcp" or any(path.startswith(p) for p in GUARDED_PREFIXES)


async def send_error(send: Send, error: WebError, status: int | None = None,
                     headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = error.body()
    await send({"type": "http.response.start", "status": status or error.status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


async def drain(receive: Receive) -> None:
    """Read and drop what the client still sends (up to a bound), so it sees the answer
    instead of a connection reset in the middle of its upload."""
    dropped = 0
    while dropped <= DRAIN_LIMIT_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            return
        dropped += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


def body_too_slow(seconds: float) -> WebError:
    return WebError("request_timeout", f"The request body did not arrive within {seconds:g} "
                    "seconds (SEEDLINE_WEB_BODY_TIMEOUT_SECONDS); send it again in one go.")


class BodyDeadline:
    """The whole body must arrive within `seconds` of the headers; past that the
    request is answered 408 and the connection closed."""

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.seconds
        complete = False
        late = False
        started = False

        async def timed_receive() -> Message:
            nonlocal complete, late
            if complete:  # after the body only a disconnect can come: no deadline
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                late = True
                # To the app this is a client gone away; the 408 below is the answer.
                return {"type": "http.disconnect"}
            if message["type"] != "http.request" or not message.get("more_body", False):
                complete = True
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if not late:
                started = started or message["type"] == "http.response.start"
                await send(message)

        await self.app(scope, timed_receive, guarded_send)
        if late and not started:
            log.info("request_body_timed_out", path=scope.get("path"), seconds=self.seconds)
            await send_error(send, body_too_slow(self.seconds))


class TokenFirst:
    """A guarded path answers 401 before reading the body when the bearer token is
    missing or unknown; a known token's instance is kept in the request's state."""

    def __init__(self, app: ASGIApp, instance_of: Callable[[], InstanceOf | None]) -> None:
        self.app = app
        self.instance_of = instance_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        check = self.instance_of()
        if scope["type"] != "http" or not _guarded(scope.get("path", "")) or check is None:
            await self.app(scope, receive, send)
            return
        from .auth import bearer

        try:
            token = bearer(HTTPConnection(scope))
            instance = await check(token)
        except WebError as exc:
            await drain(receive)
            challenge = [(b"www-authenticate", b"Bearer")] if exc.status == 401 else []
            await send_error(send, exc, headers=challenge)
            return
        except Exception as exc:  # the token table cannot be read: say so, never 500
            log.warning("token_check_failed", error=f"{type(exc).__name__}: {exc}")
            await drain(receive)
            await send_error(send, WebError("unavailable", "Seedline cannot check tokens right "
                                            "now; try again in a moment."))
            return
        scope.setdefault("state", {})["instance"] = instance
        scope["state"]["token"] = token
        await self.app(scope, receive, send)
