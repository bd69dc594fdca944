"""The gateway's fold of each conversation's lifecycle (what runs where, CONTRACT.md 4.1),
and the wait every read of it makes to read its own writes: up to the end of
SEEDLINE_SESSIONS as it was when asked, or up to a seq the caller knows."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator

from seedline_contracts.events import SessionEvent
from seedline_core import lifecycle as lc
from seedline_platform.consumer import Batch
from seedline_platform.lifecycle_events import lifecycle_steps
from seedline_platform.logging import get_logger
from seedline_platform.watermark import Watermark

from .state import GatewayState

log = get_logger(__name__)

# The fold's durable consumer: it takes only the events that move a lifecycle
# (seedline_platform.lifecycle_events.LIFECYCLE_EVENTS).
FOLD_DURABLE = "runner-gateway-sessions"
CATCH_UP_SECONDS = 5.0
RECHECK_SECONDS = 0.25  # how soon a wait on one conversation reads it again regardless


class LifecycleFold:
    def __init__(self, state: GatewayState, stream_end: Callable[[], Awaitable[int]],
                 drained: Callable[[], Awaitable[bool]] | None = None) -> None:
        self._state = state
        self._stream_end = stream_end
        self.folded = Watermark(state.applied, drained=drained)
        # How many times this copy's fold made a conversation live on each machine: a
        # presence put that repeats a machine's last one is news only after that.
        self._went_live: dict[str, int] = {}
        # Waits for an event of one conversation to be folded, by its session_id.
        self._touched: dict[str, asyncio.Event] = {}

    async def apply_sessions(self, batch: Batch[SessionEvent]) -> None:
        steps = lifecycle_steps(batch.items)
        await self._state.apply_lifecycle(steps, batch.last_seq)
        for step in steps:
            node_id = _made_live_on(step.event)
            if node_id is not None:
                self._went_live[node_id] = self._went_live.get(node_id, 0) + 1
            if (touched := self._touched.pop(step.session_id, None)) is not None:
                touched.set()
        await self.folded.advance(batch.last_seq)

    @contextlib.contextmanager
    def watching(self, session_id: str,
                 timeout: float = RECHECK_SECONDS) -> Iterator[Callable[[], Awaitable[None]]]:
        """Inside it, `await next_fold()` returns once this copy's fold applies an event of
        the conversation, or after `timeout` (a sibling copy may have folded it: the caller
        reads the row again either way). Entered before the row is read, so a fold between
        the read and the wait is not missed; folds of other conversations do not wake it."""
        touched = self._touched.setdefault(session_id, asyncio.Event())

        async def next_fold() -> None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(touched.wait(), timeout)

        try:
            yield next_fold
        finally:
            if self._touched.get(session_id) is touched:
                del self._touched[session_id]

    def went_live_on(self, node_id: str) -> int:
        return self._went_live.get(node_id, 0)

    async def caught_up(self, upto: int | None = None) -> None:
        """Wait until the fold holds every event up to `upto` (default: recorded so far)."""
        if upto is None and await self.folded.holds_everything():
            return
        target = upto if upto is not None else await self._stream_end()
        if not await self.folded.reached(target, CATCH_UP_SECONDS):
            log.warning("fold_behind", target=target, applied=self.folded.seq)


def _made_live_on(event: lc.Event) -> str | None:
    if isinstance(event, lc.Opened):
        return event.node_id
    if isinstance(event, lc.Relocated):
        return event.to_node_id
    return None
