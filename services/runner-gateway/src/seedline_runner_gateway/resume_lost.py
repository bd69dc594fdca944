"""A resume the engine refused after the launch reply said it resumed (CONTRACT.md 6, 7).

The runner reports `resume_lost` and spends the brief with the next message. The gateway
records `resume_lost` with the open's reply as the machine finally had it, so every read
of the open from then on (the request's reply, `sessions.list`, the CLI, HTTP, MCP and
the console) shows the corrected outcome, and tells the person on
`seedline.notify.<instance>`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collections.abc import Awaitable, Callable

from seedline_contracts.events import ResumeLost
from seedline_contracts.sessions import OpenReply, ResumeLostNotification
from seedline_core import lifecycle as lc
from seedline_core.notices import resume_lost_text
from seedline_platform.lifecycle_events import reply_after_resume_lost
from seedline_platform.logging import get_logger
from seedline_platform.publishing import event_message

from .state import Held

if TYPE_CHECKING:
    from .bootstrap import Ports


log = get_logger(__name__)

MAX_REASON_CHARS = 500

# The open's reply as recorded in its `opened` event, or None.
RecordedReply = Callable[[str], Awaitable[OpenReply | None]]


class ResumeLostRecorder:
    def __init__(self, ports: Ports) -> None:
        self._publisher = ports.publisher
        self._notifier = ports.notifier
        self._recorded_reply = ports.recorded_reply
        self._clock = ports.clock

    async def record(self, held: Held | None, node_id: str, session_id: str,
                     reason: str | None) -> None:
        c = held.conversation if held is not None else None
        if c is None or c.node_id != node_id or c.outcome != lc.RESUMED:
            # Only a resumed launch can lose its resume, told by the machine it ran on; a
            # repeated report finds the outcome already corrected.
            log.warning("resume_lost_ignored", session_id=session_id, node_id=node_id)
            return
        recorded = await self._recorded_reply(session_id)
        corrected = reply_after_resume_lost(recorded) if recorded is not None else None
        at = self._clock()
        await self._publisher.publish([event_message(ResumeLost(
            session_id=session_id, at=at, node_id=node_id,
            reason=(reason or "")[:MAX_REASON_CHARS] or None, reply=corrected))])
        offered = corrected.brief is not None if corrected is not None else True
        await self._notifier.notify(c.instance_id, ResumeLostNotification(
            session_id=session_id, text=resume_lost_text(offered), at=at))
        log.info("resume_lost", session_id=session_id, node_id=node_id, reason=reason)
