"""Stored notices (CONTRACT.md 1, 1.2): SEEDLINE_NOTICES keeps every notice published on
`seedline.notify.<instance>`, and a notice's id is its stream sequence. One reader of
the past (`read_notices`: the HTTP API, MCP and `seedline notices --since`) and one of
what comes (`follow_notices`: the Server-Sent Events stream), both on an ephemeral pull
consumer filtered to one instance that leaves nothing behind on the server.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import AsyncIterator

from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js import api as js_api

from seedline_contracts import subjects

MAX_READ = 1000
FETCH_BATCH = 256


@dataclass(frozen=True)
class StoredNotice:
    seq: int
    notice: dict


def _config(after_seq: int | None, since: datetime | None, live_only: bool
            ) -> js_api.ConsumerConfig:
    if after_seq is not None:
        policy = {"deliver_policy": js_api.DeliverPolicy.BY_START_SEQUENCE,
                  "opt_start_seq": after_seq + 1}
    elif since is not None:
        policy = {"deliver_policy": js_api.DeliverPolicy.BY_START_TIME, "opt_start_time": since}
    elif live_only:
        policy = {"deliver_policy": js_api.DeliverPolicy.NEW}
    else:
        policy = {"deliver_policy": js_api.DeliverPolicy.ALL}
    return js_api.ConsumerConfig(ack_policy=js_api.AckPolicy.NONE, inactive_threshold=30.0,
                                 mem_storage=True, max_ack_pending=-1, **policy)


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
    sub = await js.pull_subscribe(subjects.notify_subject(instance_id),
                                  stream=subjects.NOTICES_STREAM,
                                  config=_config(after_seq, since, live_only=False))
    found: list[StoredNotice] = []
    try:
        pending = (await sub.consumer_info()).num_pending
        while pending > 0 and len(found) < limit:
            try:
                msgs = await sub.fetch(min(pending, limit - len(found), FETCH_BATCH), timeout=5)
            except NatsTimeout:
                break  # what was counted went past its age meanwhile
            # The server's start by time is a hint (it may start earlier); the kept time decides.
            found += [n for m in msgs if (since is None or after_seq is not None
                                          or _kept_at(m) >= since)
                      and (n := _decoded(m)) is not None]
            pending = msgs[-1].metadata.num_pending
    finally:
        await _quietly_unsubscribe(sub)
    return found[:limit], pending > 0


async def follow_notices(js: JetStreamContext, instance_id: str, *,
                         after_seq: int | None = None, tick: float = 2.0
                         ) -> AsyncIterator[StoredNotice | None]:
    """The instance's notices after `after_seq` (or from now), then each as it comes;
    None every `tick` seconds without one, so the caller can look around. The consumer
    exists before the first value is yielded, so nothing published after that is missed."""
    sub = await js.pull_subscribe(subjects.notify_subject(instance_id),
                                  stream=subjects.NOTICES_STREAM,
                                  config=_config(after_seq, None, live_only=True))
    try:
        yield None
        pending = 0
        while True:
            # One at a time while waiting (a batch fetch waits to fill its batch), then
            # what is already stored in batches.
            try:
                msgs = await sub.fetch(min(pending, FETCH_BATCH) or 1, timeout=tick)
            except NatsTimeout:
                pending = 0
                yield None
                continue
            pending = msgs[-1].metadata.num_pending
            for msg in msgs:
                notice = _decoded(msg)
                if notice is not None:
                    yield notice
    finally:
        await _quietly_unsubscribe(sub)


async def _quietly_unsubscribe(sub) -> None:
    try:
        await sub.unsubscribe()
    except Exception:
        pass
