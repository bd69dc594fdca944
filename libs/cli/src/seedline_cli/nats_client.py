"""A short-lived NATS connection for one command, and request/reply with clear errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import nats
from nats.aio.client import Client
from nats.errors import (
    ConnectionClosedError,
    NoRespondersError,
    OutboundBufferLimitError,
    StaleConnectionError,
)
from nats.errors import TimeoutError as NatsTimeout

from seedline_contracts.codec import encode
from seedline_platform.nats_workarounds import survive_abandoned_flushes
from seedline_platform.settings import Settings

from .errors import START_HINT, OperationFailed, Unreachable, UsageProblem
from .sizes import size_text

CONNECT_TIMEOUT = 6.0


def cannot_reach(settings: Settings) -> Unreachable:
    return Unreachable(
        f"Cannot reach NATS at {settings.nats_url}. {START_HINT}, or set SEEDLINE_NATS_URL."
    )


async def _quiet(*_args) -> None:
    """The command reports connection problems itself; the client should not log them."""


@asynccontextmanager
async def connected(settings: Settings, name: str = "seedline-cli",
                    reconnect: bool = False) -> AsyncIterator[Client]:
    """``reconnect``: a long command (publish --file) rides out a server restart, reconnecting
    until the command itself gives up; others fail at once when the server goes."""
    try:
        # max_reconnect_attempts=0 would retry for ever inside nats-py; 1 gives each
        # server two tries and then gives up.
        nc = await asyncio.wait_for(
            nats.connect(
                servers=settings.nats_servers,
                name=name,
                connect_timeout=2,
                allow_reconnect=reconnect,
                max_reconnect_attempts=-1 if reconnect else 1,
                reconnect_time_wait=0.5 if reconnect else 0.2,
                error_cb=_quiet,
                disconnected_cb=_quiet,
                closed_cb=_quiet,
            ),
            CONNECT_TIMEOUT,
        )
    except Exception:
        raise cannot_reach(settings) from None
    survive_abandoned_flushes(nc)  # `seedline notices` runs for hours and flushes
    try:
        yield nc
    finally:
        if not nc.is_closed:
            await nc.close()


class ReplyError(OperationFailed):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message, code)


async def call(
    nc: Client, subject: str, body: dict[str, Any], *, service: str, timeout: float = 10.0
) -> dict[str, Any]:
    """Send a request and return the ``ok`` reply; an error reply raises with its message."""
    payload = encode(body)
    if len(payload) > nc.max_payload:
        raise UsageProblem(
            f"The request is {size_text(len(payload))}, over this NATS server's max payload of "
            f"{size_text(nc.max_payload)}; send less at once."
        )
    try:
        msg = await nc.request(subject, payload, timeout=timeout)
    except NoRespondersError:
        raise Unreachable(
            f"Nothing answers on {subject}: the {service} is not running. {START_HINT}."
        ) from None
    except NatsTimeout:
        raise Unreachable(
            f"The {service} did not answer on {subject} within {timeout:g} s. Check that it is "
            "running (logs are under SEEDLINE_HOME/logs with `seedline up`) and try again."
        ) from None
    except (ConnectionClosedError, StaleConnectionError, OutboundBufferLimitError):
        raise Unreachable(
            f"The connection to NATS closed before the {service} answered on {subject}; "
            "check that nats-server still runs and try again."
        ) from None
    try:
        reply = json.loads(msg.data)
    except ValueError:
        raise OperationFailed(
            f"The {service} sent a reply that is not JSON: {msg.data[:200]!r}"
        ) from None
    if not isinstance(reply, dict):
        raise OperationFailed(f"The {service} sent an unexpected reply: {reply!r}")
    if not reply.get("ok"):
        error = reply.get("error") or {}
        code = str(error.get("code", "unknown"))
        message = str(error.get("message", "the request failed"))
        if code == "invalid_request":
            raise UsageProblem(message, code)
        raise ReplyError(code, message)
    return reply
