"""What a runner says about its NATS connection: one line per event, never a traceback.

nats-py's default error callback logs every failed reconnect attempt with a full traceback
(234 lines in 15 s with the server down); a person needs to know that the server cannot be
reached, why in one phrase, and when the next attempt is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

log = structlog.get_logger(__name__)

RECONNECT_WAIT_SECONDS = 2.0
# Refusals of the machine's credentials in a row before it stops trying: one may be a server
# reloading its users; three over a few seconds mean the machine was removed.
REFUSALS_BEFORE_STOP = 3


def refused_credentials(error: BaseException) -> bool:
    return "authorization violation" in str(error).lower()


def reason(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def connection_callbacks(node_id: str, wait: float = RECONNECT_WAIT_SECONDS,
                         on_refused: Callable[[], None] = lambda: None,
                         letting_go: Callable[[], bool] = lambda: False) -> dict[str, Any]:
    """Keyword arguments for nats.connect: its reconnect pace and the callbacks that log it.
    `on_refused` is called once the server has refused the machine's credentials
    REFUSALS_BEFORE_STOP times in a row; `letting_go` says the runner is closing the
    connection itself (a stop, or a refusal to start), which is no loss of NATS."""
    refusals = 0

    async def on_error(error: BaseException) -> None:
        nonlocal refusals
        refusals = refusals + 1 if refused_credentials(error) else 0
        log.warning("nats_reconnect_failed", node_id=node_id, error=reason(error),
                    next_attempt_in_seconds=wait)
        if refusals == REFUSALS_BEFORE_STOP:
            on_refused()

    async def on_disconnected() -> None:
        if letting_go():
            return
        log.warning("nats_disconnected", node_id=node_id,
                    message=f"lost NATS; trying again every {wait:g} s")

    async def on_reconnected() -> None:
        nonlocal refusals
        refusals = 0
        log.info("nats_reconnected", node_id=node_id)

    return {"reconnect_time_wait": wait, "error_cb": on_error,
            "disconnected_cb": on_disconnected, "reconnected_cb": on_reconnected}
