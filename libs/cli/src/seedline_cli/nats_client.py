"""A short-lived NATS connection for one command, and the typed client's errors in words."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

import nats
from nats.aio.client import Client

from seedline_core.notices import not_answering_text
from seedline_platform import supervised
from seedline_platform.nats_workarounds import survive_abandoned_flushes
from seedline_platform.settings import Settings

from .disk_guard import refuse_new_work
from .errors import START_HINT, CliError, OperationFailed, Unreachable, UsageProblem
from .sizes import size_text

CONNECT_TIMEOUT = 6.0
RETRY_PAUSE = 0.5
T = TypeVar("T")


def cannot_reach(settings: Settings) -> Unreachable:
    state = supervised.state_of(settings.home, "nats-server")
    if state == supervised.RESTARTING:
        return Unreachable(f"NATS at {settings.nats_url} is starting again; try again in a few "
                           "seconds.")
    if state == supervised.RUNNING:
        # Running by `seedline up`'s word, yet not answering: busy, paused or just started.
        return Unreachable(f"NATS at {settings.nats_url} did not answer in time, though "
                           "`seedline up` here runs it; try again in a few seconds, and see "
                           "`seedline status` if it goes on.")
    return Unreachable(
        f"Cannot reach NATS at {settings.nats_url}. {START_HINT}, or set SEEDLINE_NATS_URL."
    )


def _restarting(home: Path, process: str) -> bool:
    """Whether `seedline up` on this folder is starting `process` again (or has just started
    it): only then is a refused connection worth asking again."""
    return supervised.state_of(home, process) in (supervised.RESTARTING, supervised.RUNNING)


def _home() -> Path:
    try:
        return Settings.from_env().home
    except Exception:
        return Settings().home


async def _quiet(*_args) -> None:
    """The command reports connection problems itself; the client should not log them."""


@asynccontextmanager
async def connected(settings: Settings, name: str = "seedline-cli",
                    reconnect: bool = False) -> AsyncIterator[Client]:
    """``reconnect``: a long command (publish --file) rides out a server restart, reconnecting
    until the command itself gives up; others fail at once when the server goes."""
    from seedline_platform.settings import SettingsError

    try:
        tls = settings.nats_tls()  # SEEDLINE_NATS_CA_FILE, for a server behind TLS
    except SettingsError as exc:
        raise UsageProblem(str(exc)) from None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CONNECT_TIMEOUT
    while True:
        try:
            # max_reconnect_attempts=0 would retry for ever inside nats-py; 1 gives each
            # server two tries and then gives up.
            nc = await asyncio.wait_for(
                nats.connect(
                    servers=settings.nats_servers,
                    tls=tls,
                    name=name,
                    connect_timeout=2,
                    allow_reconnect=reconnect,
                    max_reconnect_attempts=-1 if reconnect else 1,
                    reconnect_time_wait=0.5 if reconnect else 0.2,
                    error_cb=_quiet,
                    disconnected_cb=_quiet,
                    closed_cb=_quiet,
                ),
                max(0.5, deadline - loop.time()),
            )
            break
        except Exception:
            # A nats-server that `seedline up` is starting again is asked again until the
            # deadline; one nothing starts is reported at once.
            if loop.time() + RETRY_PAUSE >= deadline or not _restarting(settings.home,
                                                                        "nats-server"):
                raise cannot_reach(settings) from None
            await asyncio.sleep(RETRY_PAUSE)
    survive_abandoned_flushes(nc)  # `seedline notices` runs for hours and flushes
    try:
        yield nc
    finally:
        if not nc.is_closed:
            await nc.close()


class ReplyError(OperationFailed):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message, code)


async def answered(request: Awaitable[T]) -> T:
    """The reply of a request made with the typed client (seedline_client); each way it can
    fail becomes this command's error, in words that say what to do."""
    # Imported here: the typed client (msgspec, every wire type) is a quarter of a quick
    # command's start-up, and `seedline status` asks nothing through it.
    from seedline_client import ClientError, ConnectionLost, NoAnswer, Refused

    try:
        return await request
    except ClientError as exc:
        silent = isinstance(exc, (NoAnswer, ConnectionLost)) or (
            isinstance(exc, Refused) and exc.code in ("unavailable", "timeout"))
        if silent:
            refuse_new_work()  # a full disk is the cause to name, not the service's silence
        raise in_words(exc) from None


def in_words(exc: Exception) -> CliError:
    """The command's error for a failed request of the typed client."""
    from seedline_client import (
        ConnectionLost,
        NoAnswer,
        NotRunning,
        Refused,
        TooLarge,
        UnreadableReply,
    )

    if isinstance(exc, TooLarge):
        return UsageProblem(
            f"The request is {size_text(exc.size)}, over this NATS server's max payload of "
            f"{size_text(exc.limit)}; send less at once.")
    if isinstance(exc, NotRunning):
        # The client already asked again for a few seconds (seedline_client).
        state = supervised.state_of(_home(), exc.service)
        return Unreachable(not_answering_text(exc.service, state))
    if isinstance(exc, NoAnswer):
        return Unreachable(
            f"The {exc.service} did not answer on {exc.subject} within {exc.timeout:g} s. Check "
            "that it is running (logs are under SEEDLINE_HOME/logs with `seedline up`) and try "
            "again.")
    if isinstance(exc, ConnectionLost):
        return Unreachable(
            f"The connection to NATS closed before the {exc.service} answered on {exc.subject}; "
            "check that nats-server still runs and try again.")
    if isinstance(exc, UnreadableReply):
        return OperationFailed(
            f"The {exc.service} sent a reply Seedline cannot read ({exc.why}): {exc.data[:200]!r}")
    if isinstance(exc, Refused):
        code, message = exc.code or "unknown", exc.message or "the request failed"
        if code == "invalid_request":
            return UsageProblem(message, code)
        return ReplyError(code, message)
    return OperationFailed(str(exc))
