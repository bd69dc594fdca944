"""The rest of Seedline as the wire contract shows it: request/reply APIs, the
ingest subject, the presence bucket and the conversation events.

Nothing here knows about HTTP, tokens or instances a caller may see; that is
tenant.py. The request/reply APIs go through the typed client (seedline_client), as the
CLI's do; each way a request fails becomes a WebError with the message to show.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import msgspec
from nats.aio.client import Client
from nats.errors import NoRespondersError
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from seedline_client import ClientError, NoAnswer, NotRunning, Refused, SeedlineClient
from seedline_contracts import subjects
from seedline_contracts.codec import decode, encode
from seedline_contracts.events import OpenRequested
from seedline_contracts.runner import RunnerPresence
from seedline_contracts.tokens import TokenError, escape_token, unescape_token
from seedline_contracts.sessions import (
    BriefGetReply,
    BriefGetRequest,
    OpenReply,
    OpenRequest,
    RelocateRequest,
    SessionsListReply,
    SessionsListRequest,
    StopReply,
    StopRequest,
)
from seedline_contracts.timeline import (
    AppendReply,
    RejectedInput,
    TimelineEntryIn,
    TimelineReadReply,
    TimelineReadRequest,
)
from seedline_core.notices import error_message, not_answering_text
from seedline_platform import supervised
from seedline_platform.lifecycle_events import ConversationRecord, conversation_record
from seedline_platform.logging import get_logger
from seedline_platform.natsio import publish_window
from seedline_platform.notices import StoredNotice, read_notices
from seedline_platform.replay import last_seq, newest_values, replay
from seedline_platform.sealing import Sealer
from seedline_platform.session_reads import conversation_events, newest_event, opened

from .errors import WebError, unavailable

log = get_logger(__name__)

T = TypeVar("T")

OWNER_CACHE_SIZE = 10_000


@dataclass(frozen=True)
class OpenedHere:
    session_id: str
    node_id: str
    engine: str


@dataclass(frozen=True)
class Owner:
    """Where a conversation the platform opened lives; it never changes."""

    instance_id: str
    repo: str


class Backend:
    def __init__(self, nc: Client, js: JetStreamContext, open_timeout: float,
                 sealer: Sealer, request_timeout: float = 10.0, home: Path | None = None
                 ) -> None:
        self.nc = nc
        self._home = home  # SEEDLINE_HOME, where `seedline up` says what it runs
        self.js = js
        # Text sealed at rest (a brief, a person's instruction) is opened where it is read.
        self._sealer = sealer
        self.api = SeedlineClient(nc, request_timeout)
        self._open_timeout = open_timeout
        self._owners: OrderedDict[str, Owner] = OrderedDict()
        # The newest open this process made per (instance, repo), with when it was answered.
        self._opened_here: OrderedDict[tuple[str, str], tuple[OpenedHere, float]] = OrderedDict()

    @property
    def max_payload(self) -> int:
        """The largest message the NATS server carries (its max_payload)."""
        return int(self.nc.max_payload or 1024 * 1024)

    async def _call(self, request: Awaitable[T]) -> T:
        """A request's reply; each way it can fail is a WebError with the words to show."""
        try:
            return await request
        except NotRunning as exc:
            # The client asked again for a few seconds already (seedline_client); what
            # `seedline up` on this machine says of the service tells a restart from a stop.
            raise WebError("unavailable", not_answering_text(
                exc.service, supervised.state_of(self._home, exc.service)
                if self._home is not None else None)) from None
        except NoAnswer as exc:
            raise WebError(
                "timeout",
                f"The {exc.service} did not answer within {exc.timeout:g} seconds; try again in a "
                "moment.",
            ) from None
        except Refused as exc:
            code = exc.code or "unavailable"
            raise WebError(code, exc.message or error_message(code)) from None
        except ClientError as exc:  # the connection away, a reply unreadable, a body too large
            log.warning("request_failed", subject=exc.subject, error=type(exc).__name__)
            raise unavailable() from None

    # -- request/reply APIs (CONTRACT.md 2.1, 2.3, 3, 4) ---------------------------------

    async def append(self, entry: TimelineEntryIn) -> AppendReply:
        return await self._call(self.api.append(entry))

    async def read(self, request: TimelineReadRequest) -> TimelineReadReply:
        return await self._call(self.api.read(request))

    async def open(self, request: OpenRequest) -> OpenReply:
        # Every open carries a request_id, so a `timeout` can name the one that gets its
        # answer (CONTRACT.md 4).
        if request.request_id is None:
            request = msgspec.structs.replace(request, request_id="web-" + secrets.token_hex(8))
        try:
            reply = await self._call(self.api.open(request, self._open_timeout + 5))
        except WebError as exc:
            if exc.code != "timeout":
                raise
            raise WebError("timeout", error_message(
                "timeout", request_id=request.request_id)) from None
        self._remember_owner(reply.session_id, Owner(request.instance_id, request.repo))
        key = (request.instance_id, request.repo)
        self._opened_here[key] = (OpenedHere(reply.session_id, reply.node_id, request.engine),
                                  time.monotonic())
        self._opened_here.move_to_end(key)
        while len(self._opened_here) > OWNER_CACHE_SIZE:
            self._opened_here.popitem(last=False)
        return reply

    def opened_here(self, instance_id: str, repo: str, within: float) -> OpenedHere | None:
        """The open this process made on the repo less than `within` seconds ago."""
        found = self._opened_here.get((instance_id, repo))
        if found is None or time.monotonic() - found[1] > within:
            return None
        return found[0]

    async def relocate(self, request: RelocateRequest) -> OpenReply:
        return await self._call(self.api.relocate(request, self._open_timeout + 5))

    async def stop(self, request: StopRequest) -> StopReply:
        return await self._call(self.api.stop(request))

    async def live(self, instance_id: str) -> SessionsListReply:
        return await self._call(self.api.live(SessionsListRequest(instance_id=instance_id)))

    async def brief(self, session_id: str) -> BriefGetReply:
        return await self._call(self.api.brief(BriefGetRequest(session_id=session_id)))

    # -- ingest (CONTRACT.md 2.1) ---------------------------------------------------------

    async def publish(self, entries: list[TimelineEntryIn]) -> list[tuple[int, bool]]:
        """Publish with JetStream, Nats-Msg-Id = entry_id; (ingest seq, duplicate) each."""
        messages = [(subjects.ingest_timeline_subject(e.instance_id), encode(e),
                     {"Nats-Msg-Id": e.entry_id})
                    for e in entries]
        try:
            acks = await publish_window(self.js, messages)
        except NoRespondersError:
            raise WebError(
                "unavailable",
                "The ingest stream is not there yet; start the timeline-writer (`seedline up` "
                "runs everything) and publish again.",
            ) from None
        except Exception as exc:
            log.warning("publish_failed", error=str(exc))
            raise unavailable() from None
        return [(int(ack.seq), bool(ack.duplicate)) for ack in acks]

    # -- machines (CONTRACT.md 6) ---------------------------------------------------------

    async def machines(self) -> list[RunnerPresence]:
        """Every machine with a live presence key, by node id."""
        found = []
        try:
            async for key, msg in newest_values(self.js, subjects.RUNNERS_BUCKET):
                try:
                    found.append((key, decode(msg.data, RunnerPresence)))
                except Exception:
                    continue  # unreadable: it says nothing of the machine
        except NotFoundError:  # no bucket yet (BucketNotFoundError is one too)
            return []
        except Exception as exc:
            log.warning("presence_unreadable", error=str(exc))
            raise unavailable() from None
        return [presence for _, presence in sorted(found, key=lambda pair: pair[0])]

    # -- repos, from the timeline stream's own subject index ---------------------------------

    async def repo_counts(self, instance_id: str) -> dict[str, int]:
        """Entries per repo of an instance: the stream counts them per subject
        (seedline.timeline.<instance>.<repo>.<session>.<kind>), so no table is needed."""
        prefix = f"seedline.timeline.{escape_token(instance_id)}."
        try:
            info = await self.js.stream_info(subjects.TIMELINE_STREAM, subjects_filter=prefix + ">")
        except Exception as exc:
            log.warning("timeline_subjects_unreadable", error=str(exc))
            raise unavailable() from None
        counts: dict[str, int] = {}
        for subject, count in (info.state.subjects or {}).items():
            try:
                repo = unescape_token(subject[len(prefix):].split(".", 1)[0])
            except TokenError:
                continue
            counts[repo] = counts.get(repo, 0) + int(count)
        return counts

    async def stream_ends(self) -> tuple[int, int]:
        """The last sequence of SEEDLINE_SESSIONS and of SEEDLINE_NOTICES now (0 for a
        stream not there yet): where a console page's live stream takes over."""
        ends = []
        for stream in (subjects.SESSIONS_STREAM, subjects.NOTICES_STREAM):
            try:
                ends.append(await last_seq(self.js, stream))
            except NotFoundError:
                ends.append(0)
            except Exception as exc:
                log.warning("stream_unreadable", stream=stream, error=str(exc))
                raise unavailable() from None
        return ends[0], ends[1]

    # -- stored notices (CONTRACT.md 1) ------------------------------------------------

    async def notices(self, instance_id: str, after_seq: int | None, since: datetime | None,
                      limit: int) -> tuple[list[StoredNotice], bool]:
        try:
            return await read_notices(self.js, instance_id, after_seq=after_seq, since=since,
                                      limit=limit)
        except NotFoundError:  # no stream yet: nothing was kept
            return [], False
        except Exception as exc:
            log.warning("notices_unreadable", error=str(exc))
            raise unavailable() from None

    # -- rejected input (CONTRACT.md 2.1) ----------------------------------------------------

    async def rejected(self, scan: int) -> list[tuple[int, RejectedInput]]:
        """The newest `scan` records of SEEDLINE_REJECTED, oldest first."""
        try:
            end = await last_seq(self.js, subjects.REJECTED_STREAM)
        except NotFoundError:  # no stream yet
            return []
        except Exception as exc:
            log.warning("rejected_unreadable", error=str(exc))
            raise unavailable() from None
        found = []
        async for batch in replay(self.js, subjects.REJECTED_STREAM, "seedline.rejected.>",
                                  max(1, end - scan + 1), end):
            for msg in batch:
                try:
                    found.append((msg.metadata.sequence.stream, decode(msg.data, RejectedInput)))
                except msgspec.MsgspecError:
                    continue
        return found

    # -- which instance a conversation belongs to -------------------------------------------

    def _remember_owner(self, session_id: str, owner: Owner) -> None:
        self._owners[session_id] = owner
        self._owners.move_to_end(session_id)
        while len(self._owners) > OWNER_CACHE_SIZE:
            self._owners.popitem(last=False)

    async def conversation(self, session_id: str) -> ConversationRecord:
        """A conversation's whole record (CONTRACT.md 7), read through the contract's types
        with its sealed text opened, and folded the one way every surface folds it."""
        try:
            events = await conversation_events(self.js, session_id, self._sealer)
        except Exception as exc:
            log.warning("session_events_unreadable", error=str(exc))
            raise unavailable() from None
        return conversation_record(events)

    async def readable(self, event: T) -> T:
        """An event read live, with its sealed text opened as conversation() opens it."""
        return await opened(event, self._sealer)

    async def entry_text(self, instance_id: str, content: str) -> str | None:
        """A stored entry's content opened with its instance's key (None: forgotten)."""
        return await self._sealer.open_or_none(instance_id, content)

    async def owner(self, session_id: str) -> Owner | None:
        """The instance and repo of a conversation the platform opened, from its own events.

        Every platform conversation starts with `open_requested`, which names both; a
        direct get of the last message on that subject needs no consumer and no table.
        """
        if session_id in self._owners:
            return self._owners[session_id]
        try:
            requested = await newest_event(self.js, session_id, OpenRequested)
        except Exception as exc:
            log.warning("session_event_unreadable", error=str(exc))
            raise unavailable() from None
        if requested is None:
            return None
        owner = Owner(requested.instance_id, requested.repo)
        self._remember_owner(session_id, owner)
        return owner
