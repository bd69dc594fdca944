"""Requests the gateway sends to a machine that are not launches."""

from __future__ import annotations

import json

from nats.aio.client import Client

from seedline_contracts import subjects
from seedline_contracts.codec import encode
from seedline_contracts.runner import RunnerStopRequest
from seedline_platform.logging import get_logger

log = get_logger(__name__)


async def stop_on_machine(nc: Client, node_id: str, session_id: str, reason: str, timeout: float) -> bool:
    """Ask the machine to stop a conversation; a machine that does not answer is logged, not fatal."""
    try:
        msg = await nc.request(
            subjects.runner_subject(node_id, "stop"),
            encode(RunnerStopRequest(session_id=session_id, reason=reason)),
            timeout=timeout,
        )
        return bool(json.loads(msg.data).get("stopped"))
    except Exception:
        log.warning("stop_not_delivered", session_id=session_id, node_id=node_id)
        return False
