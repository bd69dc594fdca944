"""When a live conversation was last active: the later of what the gateway's rows hold (its
open, a person's message the follower took) and its newest timeline entry (an engine's
output). The gateway follows only a person's messages on the timeline, so an engine's
output is read from the timeline-writer's projection when it is asked for (the idle sweep,
the list of live conversations), not taken entry by entry as it is written."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import datetime

from .state import Held

# (instance_id, repo, session_id) of each conversation -> its newest entry's `at`, by
# session_id (TimelineView.newest_at).
NewestEntries = Callable[[Sequence[tuple[str, str, str]]], Awaitable[dict[str, datetime]]]


async def no_entries(conversations: Sequence[tuple[str, str, str]]) -> dict[str, datetime]:
    return {}


async def with_newest_activity(helds: Sequence[Held], newest_entries: NewestEntries) -> list[Held]:
    """Each conversation with its newest entry counted as activity."""
    if not helds:
        return []
    newest = await newest_entries([(h.conversation.instance_id, h.conversation.repo,
                                    h.session_id) for h in helds])
    return [replace(h, last_activity=_later(h.last_activity, newest.get(h.session_id)))
            for h in helds]


def _later(held: datetime | None, written: datetime | None) -> datetime | None:
    if held is None or written is None:
        return held or written
    return max(held, written)
