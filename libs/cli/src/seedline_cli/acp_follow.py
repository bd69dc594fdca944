"""What `seedline acp` hears of the platform as it happens: pushes, not polls.

A turn waits on three things the platform records (acp_turn): the repo's timeline (the
engine's output and its end mark), conversation events (a wake, a failed open, a stop)
and notices (nothing could be woken). Each is a subscription that wakes the turns
waiting on it; the turn then reads the timeline through the API, which unseals it,
asking for the newest pushed seq so the read includes it (``min_seq``).

The timeline and the events are JetStream ordered consumers that start at the newest
message (no history is replayed; headers only, as the seq is all that is read of an
entry); notices are a plain subscription, as they are plain publishes.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy

from seedline_contracts import subjects
from seedline_contracts.tokens import escape_token

log = logging.getLogger(__name__)

Listener = Callable[[str, Any], None]


class PlatformFeed:
    """One connection's subscriptions, shared by every turn of one `seedline acp`."""

    def __init__(self, nc: Client, instance: str) -> None:
        self._nc = nc
        self._instance = instance
        self._subscriptions: list[Any] = []
        self._repos: dict[str, int] = {}
        self._listeners: set[Listener] = set()
        self._started = False

    def newest(self, repo: str) -> int:
        """The newest timeline seq pushed for `repo` (0: none yet)."""
        return self._repos.get(repo, 0)

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(kind, payload)` for each push: ("timeline", repo), ("event",
        body) or ("notice", body). Returns what stops it."""
        self._listeners.add(listener)
        return lambda: self._listeners.discard(listener)

    async def follow(self, repo: str) -> None:
        """Push the repo's timeline from now on (once per repo), and events and notices."""
        js = self._nc.jetstream()
        if not self._started:
            self._started = True
            self._subscriptions.append(await js.subscribe(
                "seedline.session.>", cb=self._on_event, ordered_consumer=True,
                deliver_policy=DeliverPolicy.NEW))
            self._subscriptions.append(await self._nc.subscribe(
                subjects.notify_subject(self._instance), cb=self._on_notice))
        if repo in self._repos:
            return
        self._repos[repo] = 0
        prefix = f"seedline.timeline.{escape_token(self._instance)}.{escape_token(repo)}.>"

        async def on_entry(msg: Msg) -> None:
            self._repos[repo] = max(self._repos[repo], msg.metadata.sequence.stream)
            self._tell("timeline", repo)

        self._subscriptions.append(await js.subscribe(
            prefix, cb=on_entry, ordered_consumer=True, deliver_policy=DeliverPolicy.NEW,
            headers_only=True))

    async def close(self) -> None:
        for subscription in self._subscriptions:
            try:
                await subscription.unsubscribe()
            except Exception:
                pass
        self._subscriptions.clear()

    async def _on_event(self, msg: Msg) -> None:
        body = _json(msg.data)
        if body is not None:
            self._tell("event", body)

    async def _on_notice(self, msg: Msg) -> None:
        body = _json(msg.data)
        if body is not None:
            self._tell("notice", body)

    def _tell(self, kind: str, payload: Any) -> None:
        for listener in list(self._listeners):
            try:
                listener(kind, payload)
            except Exception:
                log.exception("a turn could not take what the platform said")


def _json(data: bytes) -> dict[str, Any] | None:
    try:
        body = json.loads(data or b"")
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


async def until_told(wake: asyncio.Event, cancelled: asyncio.Event, recheck: float) -> None:
    """Wait for a push or a cancel; after `recheck` seconds read anyway (a push lost on
    a reconnect must not leave a turn waiting: reading ends nothing by itself)."""
    waits = {asyncio.ensure_future(wake.wait()), asyncio.ensure_future(cancelled.wait())}
    try:
        await asyncio.wait(waits, timeout=recheck, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()
