"""Stored notices (CONTRACT.md 1): SEEDLINE_NOTICES keeps every notice published on
`seedline.notify.<instance>`, and a notice's id is its stream sequence. One reader of
the past (`read_notices`: the HTTP API, MCP and `seedline notices --since`) and one of
what comes (`follow_notices`: the Server-Sent Events stream), both on an ephemeral pull
consumer filtered to one instance that leaves nothing behind on the server.
"""

from __future__ import annotations

import json
from contextlib import aclosing
from dataclasses import dataclass
from datetime import datetime
from typing import AsyncIterator

from nats.js import JetStreamContext
from nats.js import api as js_api

from seedline_contracts import subjects

from .replay import follow, stored

MAX_READ = 1000


@dataclass(frozen=True)
class StoredNotice:
    seq: int
    notice: dict


def _policy(after_seq: int | None, since: datetime | None, live_only: bool) -> dict:
    if after_seq is not None:
        return {"deliver_policy": js_api.DeliverPolicy.BY_START_SEQUENCE,
                "opt_start_seq": after_seq + 1}
    if since is not None:
        return {"deliver_policy": js_api.DeliverPolicy.BY_START_TIME, "opt_start_time": since}
    if live_only:
        return {"deliver_policy": js_api.DeliverPolicy.NEW}
    return {"deliver_policy": js_api.DeliverPolicy.ALL}


def _kept_at(msg) -> datetime:
    return msg.metadata.timestamp


def _decoded(msg) -> StoredNotice | None:
    try:
        body = json.loads(msg.data)
    except (ValueError, RecursionError):
        return None
    return StoredNotice(msg.metadata.sequence.stream, body) if isinstance(body, dict) else None


async def read_notices(js: JetStreamContext, instance_id: str, *, after_seq: int | None = None,
                       since: datetime | None = None, limit: int = 100
                       ) -> tuple[list[StoredNotice], bool]:
    """The instance's stored notices after `after_seq` (or at or after `since`, or all),
    oldest first, at most `limit`; and whether more follow them."""
    limit = max(1, min(limit, MAX_READ))
    found: list[StoredNotice] = []
    more = False
    kept = stored(js, subjects.NOTICES_STREAM, subjects.notify_subject(instance_id),
                  **_policy(after_seq, since, live_only=False))
    async with aclosing(kept):
        async for msg in kept:
            # The server's start by time is a hint (it may start earlier); the kept time
            # decides.
            if since is not None and after_seq is None and _kept_at(msg) < since:
                continue
            if len(found) == limit:
                more = True
                break
            if (notice := _decoded(msg)) is not None:
                found.append(notice)
    return found, more


async def follow_notices(js: JetStreamContext, instance_id: str, *,
                         after_seq: int | None = None, tick: float = 2.0
                         ) -> AsyncIterator[StoredNotice | None]:
    """The instance's notices after `after_seq` (or from now), then each as it comes;
    None every `tick` seconds without one, so the caller can look around. The consumer
    exists before the first value is yielded, so nothing published after that is missed."""
    followed = follow(js, subjects.NOTICES_STREAM, subjects.notify_subject(instance_id),
                      after_seq=after_seq, tick=tick)
    async with aclosing(followed):
        async for msg in followed:
            if msg is None:
                yield None
            elif (notice := _decoded(msg)) is not None:
                yield notice
