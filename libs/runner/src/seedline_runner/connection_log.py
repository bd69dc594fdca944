"""What a runner says about its NATS connection: one line per event, never a traceback.

nats-py's default error callback logs every failed reconnect attempt with a full traceback
(234 lines in 15 s with the server down); a person needs to know that the server cannot be
reached, why in one phrase, and when the next attempt is.
"""

from __future__ import annotations

from typing import Any

import structlog

log = structlog.get_logger(__name__)

RECONNECT_WAIT_SECONDS = 2.0


def reason(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def connection_callbacks(node_id: str, wait: float = RECONNECT_WAIT_SECONDS) -> dict[str, Any]:
    """Keyword arguments for nats.connect: its reconnect pace and the callbacks that log it."""

    async def on_error(error: BaseException) -> None:
        log.warning("nats_reconnect_failed", node_id=node_id, error=reason(error),
                    next_attempt_in_seconds=wait)

    async def on_disconnected() -> None:
        log.warning("nats_disconnected", node_id=node_id,
                    message=f"lost NATS; trying again every {wait:g} s")

    async def on_reconnected() -> None:
        log.info("nats_reconnected", node_id=node_id)

    return {"reconnect_time_wait": wait, "error_cb": on_error,
            "disconnected_cb": on_disconnected, "reconnected_cb": on_reconnected}
