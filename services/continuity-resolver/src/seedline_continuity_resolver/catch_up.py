"""Read your own writes before deciding: the projection holds what was recorded before the
request came, and the instruction the last open of the repo put into ingest is in the
timeline view.

Each wait ends at a watermark: the resolver's projections advance theirs as they commit
(seedline_platform.watermark), the timeline view says when an entry is readable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from seedline_contracts import subjects
from seedline_core.decision import TURN_KINDS
from seedline_platform.bounded import trim_oldest
from seedline_platform.logging import get_logger
from seedline_timeline_view import AppliedEntry, TimelineView

from .before_message import TURN_LOOKBACK
from .repository import TIMELINE, ConversationRepository

log = get_logger(__name__)

CATCH_UP_SECONDS = 2.0
MAX_UNLANDED = 10_000

StreamEnds = Callable[[], Awaitable[dict[str, int]]]
Reached = Callable[[str, int, float], Awaitable[bool]]


class CatchUp:
    def __init__(self, repo: ConversationRepository, view: TimelineView,
                 stream_ends: StreamEnds | None = None, reached: Reached | None = None) -> None:
        self._repo = repo
        self._view = view
        self._stream_ends = stream_ends
        self._reached = reached or self._poll_reached
        # The instruction each repo's last open put into ingest, until the timeline holds
        # it: the writer moves it there asynchronously, and the next decision on that repo
        # (a relocation a moment later, another open) must brief from it.
        self._unlanded: dict[tuple[str, str], str] = {}

    def expect_landing(self, instance_id: str, repo: str, session_id: str) -> None:
        self._unlanded.pop((instance_id, repo), None)
        self._unlanded[(instance_id, repo)] = subjects.instruction_entry_id(session_id)
        trim_oldest(self._unlanded, MAX_UNLANDED)  # the oldest has long landed

    async def own_instruction_landed(self, instance_id: str, repo: str) -> None:
        """The repo's last instruction is in the timeline view."""
        entry_id = self._unlanded.pop((instance_id, repo), None)
        if entry_id is not None and not await self._view.wait_until_stored(
                entry_id, CATCH_UP_SECONDS):
            log.warning("instruction_not_in_timeline", entry_id=entry_id, repo=repo)

    async def recorded_before(self, wake_seq: int | None,
                              ends: dict[str, int] | None = None) -> AppliedEntry | None:
        """Every event recorded before this moment is in the projection: each stream up to
        where it ended when the request came, or up to `ends` where the caller knows them
        (no round trip to the server). Returns the message at `wake_seq` and its repo's
        head before it, read as it is waited for."""
        if ends is None:
            ends = await self._stream_ends() if self._stream_ends is not None else {}
        if wake_seq is not None:
            # The message itself counts as activity of the conversation it was written in.
            ends[TIMELINE] = max(ends.get(TIMELINE, 0), wake_seq)
        waits = [self._reached(projection, seq, CATCH_UP_SECONDS) for projection, seq in ends.items()]
        if wake_seq is not None:
            # With the message, its conversation before it: what the decision reads of the
            # conversation a message to it touched (before_message.py).
            waits.append(self._view.wait_for_entry(wake_seq, CATCH_UP_SECONDS, TURN_KINDS,
                                                   TURN_LOOKBACK))
        done = await asyncio.gather(*waits)
        for projection, ok in zip(ends, done):
            if not ok:
                log.warning("projection_behind", projection=projection, target=ends[projection])
        return done[-1] if wake_seq is not None else None

    async def _poll_reached(self, projection: str, seq: int, timeout: float) -> bool:
        """Without the app's watermarks (the unit tests): the stored offset, polled."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while await self._repo.applied(projection) < seq:
            if loop.time() > deadline:
                return False
            await asyncio.sleep(0.002)
        return True
