"""A console page's live stream (Server-Sent Events): what happens to the conversation or
the repo on screen, as it happens, so the page never needs a reload.

Three streams are followed at once, each from where the page's own read ended: the
conversation's events in SEEDLINE_SESSIONS (typed, their sealed text opened, as every
surface reads them), its timeline entries in SEEDLINE_TIMELINE (the engine's output as
it arrives, opened with the instance's key) and the instance's notices. Each SSE event's
`id:` is where all three stand (`sessions.timeline.notices`), so a browser that
reconnects with `Last-Event-ID` (every EventSource does) misses nothing and, as every item
carries an id, is shown nothing twice. The items are HTML made by the same functions as
the page (history.py, render.py); the page's script puts each in its place.

A stream counts against the login's token and address like the API's (stream_slots.py)
and ends within seconds of the login's end or its token's revocation.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import aclosing
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import AsyncIterator, Callable

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response, StreamingResponse
from nats.aio.msg import Msg

from seedline_contracts import events as ev
from seedline_contracts import subjects
from seedline_contracts.channels import event_tag
from seedline_contracts.codec import decoder
from seedline_contracts.timeline import TimelineEntry, TimelineRow
from seedline_contracts.tokens import TokenError, escape_token, unescape_token
from seedline_platform.lifecycle_events import ConversationRecord, conversation_record
from seedline_platform.logging import get_logger
from seedline_platform.notices import StoredNotice
from seedline_platform.replay import follow

from ..auth import COOKIE
from ..errors import WebError
from ..fields import MAX_SEQ
from ..notifications import RECHECK_SECONDS, sse_event, sse_stream
from ..opens import record_of
from ..tenant import Tenant, check_name
from . import history, render
from .pages import _login, _tenant_of

log = get_logger(__name__)

router = APIRouter(prefix="/console", include_in_schema=False)
HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
# An EventSource waits this long before it connects again after a drop.
RETRY = "retry: 2000\n\n"
# Events that change how an open reads: its answer, or a correction of it.
ANSWERS = (ev.Opened, ev.Relocated, ev.OpenFailed, ev.ResumeLost, ev.SeedComposed)
ANSWER_TAGS = {event_tag(kind) for kind in ANSWERS}

_events = decoder(ev.SessionEvent)
_entries = decoder(TimelineEntry)


@dataclass
class Positions:
    """Where a page's stream stands in each stream it follows: the last sequence sent."""

    sessions: int
    timeline: int
    notices: int

    @property
    def id(self) -> str:
        return f"{self.sessions}.{self.timeline}.{self.notices}"

    @classmethod
    def parse(cls, text: str) -> "Positions":
        parts = text.strip().split(".")
        if len(parts) != 3 or not all(p.isascii() and p.isdigit() and len(p) <= 19
                                      for p in parts):
            raise WebError("invalid_request", "The stream's position must be three whole "
                           "numbers joined by dots (the last event's id); reload the page.")
        numbers = [int(p) for p in parts]
        if any(n > MAX_SEQ for n in numbers):
            raise WebError("invalid_request", "The stream's position is past any stream; "
                           "reload the page.")
        return cls(*numbers)


def login_still_valid(request: Request) -> Callable:
    """A console stream lives as long as its login (and so its token)."""
    web = request.app.state.web
    reference = request.cookies.get(COOKIE)

    async def still_allowed() -> bool:
        return await web.logins.find(reference) is not None

    return still_allowed


@router.get("/live")
async def live(request: Request, conversation: str | None = Query(None, max_length=300),
               repo: str | None = Query(None, max_length=1000),
               after: str = Query("", max_length=80)) -> Response:
    login = await _login(request)
    if login is None:
        return Response(status_code=401)
    try:
        start = Positions.parse(request.headers.get("last-event-id") or after)
        tenant = _tenant_of(request, login)
        if conversation is not None:
            feed: Feed = ConversationFeed(tenant, conversation, start,
                                          (await tenant.owner(conversation)).repo)
        elif repo is not None:
            feed = RepoFeed(tenant, check_name("repo", repo), start)
        else:
            raise WebError("invalid_request", "Say which page to follow: conversation or repo.")
        stream = await sse_stream(request.app.state.web, request, login.token_sha256,
                                  login_still_valid(request), feed.start)
    except WebError as exc:
        return Response(exc.body(), status_code=exc.status, media_type="application/json")
    return StreamingResponse(stream, media_type="text/event-stream", headers=HEADERS)


class Feed:
    """Follows the page's three streams and says what each message changes on it."""

    def __init__(self, tenant: Tenant, start: Positions) -> None:
        self.tenant = tenant
        self.at = start
        self.labels: dict[str, str] = {}

    def subjects(self) -> dict[str, tuple[str, str, int]]:
        """name -> (stream, subject filter, after seq)."""
        raise NotImplementedError

    async def prepare(self) -> None:
        """What the feed reads once before it follows (the machines' labels, ...)."""
        self.labels = {m.node_id: m.label for m in await self.tenant.machines()}

    async def start(self) -> AsyncIterator[str | None]:
        await self.prepare()
        js = self.tenant.backend.js
        followed = {name: follow(js, stream, subject, after_seq=after, tick=RECHECK_SECONDS)
                    for name, (stream, subject, after) in self.subjects().items()}
        merged = _merged(followed)
        try:
            await merged.__anext__()  # every consumer is in place
        except BaseException:
            await merged.aclose()
            raise
        return self._events(merged)

    async def _events(self, merged) -> AsyncIterator[str | None]:
        sent = self.at.id
        async with aclosing(merged):
            yield RETRY
            async for item in merged:
                if item is None:
                    if self.at.id != sent:
                        # Where it stands, after messages that changed nothing here: a
                        # reconnect then starts from there.
                        sent = self.at.id
                        yield sse_event("position", {}, sent)
                    else:
                        yield None
                    continue
                name, msg = item
                seq = msg.metadata.sequence.stream
                try:
                    said = await self.on(name, msg)
                except Exception as exc:  # one unreadable message never ends the page's stream
                    log.warning("live_item_skipped", stream=name, seq=seq,
                                error=f"{type(exc).__name__}: {exc}")
                    said = []
                setattr(self.at, name, max(getattr(self.at, name), seq))
                for kind, body in said:
                    sent = self.at.id
                    yield sse_event(kind, body, sent)

    async def on(self, name: str, msg: Msg) -> list[tuple[str, dict]]:
        if name == "notices":
            return self.notice(msg)
        if name == "sessions":
            return await self.session_event(msg)
        return await self.entry(msg)

    def notice(self, msg: Msg) -> list[tuple[str, dict]]:
        body = json.loads(msg.data)
        if not isinstance(body, dict):
            return []
        return [("notice", {"id": msg.metadata.sequence.stream, "kind": body.get("kind"),
                            "text": str(body.get("text") or ""),
                            "session_id": body.get("session_id")})]

    async def session_event(self, msg: Msg) -> list[tuple[str, dict]]:
        raise NotImplementedError

    async def entry(self, msg: Msg) -> list[tuple[str, dict]]:
        raise NotImplementedError

    async def row(self, msg: Msg) -> TimelineRow | None:
        """An entry as the timeline's reads give it, its content opened."""
        entry = _entries.decode(msg.data)
        if entry.instance_id != self.tenant.instance_id:
            return None
        content = await self.tenant.backend.entry_text(entry.instance_id, entry.content)
        if content is None:
            return None  # its instance was forgotten meanwhile
        return TimelineRow(seq=msg.metadata.sequence.stream, entry_id=entry.entry_id,
                           session_id=entry.session_id, kind=entry.kind, content=content,
                           at=entry.at, engine=entry.engine, truncated_from=entry.truncated_from)


def _now() -> datetime:
    return datetime.now(timezone.utc)


class ConversationFeed(Feed):
    """A conversation's page: its events, entries and notices as history items, and its
    state as its events leave it."""

    def __init__(self, tenant: Tenant, session_id: str, start: Positions, repo: str) -> None:
        super().__init__(tenant, start)
        self.session_id = session_id
        self.repo = repo
        self.record: ConversationRecord | None = None

    async def prepare(self) -> None:
        await super().prepare()
        # The events before where the stream starts: an answer shown live is read with
        # the conversation's whole record (a brief given or not, a resume lost).
        whole = await self.tenant.backend.conversation(self.session_id)
        self.record = conversation_record(
            [(seq, e) for seq, e in whole.events if seq <= self.at.sessions])

    def subjects(self) -> dict[str, tuple[str, str, int]]:
        i, r, s = (escape_token(self.tenant.instance_id), escape_token(self.repo),
                   escape_token(self.session_id))
        return {
            "sessions": (subjects.SESSIONS_STREAM, f"seedline.session.{s}.*", self.at.sessions),
            "timeline": (subjects.TIMELINE_STREAM, f"seedline.timeline.{i}.{r}.{s}.*",
                         self.at.timeline),
            "notices": (subjects.NOTICES_STREAM, subjects.notify_subject(
                self.tenant.instance_id), self.at.notices),
        }

    def notice(self, msg: Msg) -> list[tuple[str, dict]]:
        said = super().notice(msg)
        if said and said[0][1]["session_id"] == self.session_id:
            item = history.notice_item(StoredNotice(msg.metadata.sequence.stream,
                                                    json.loads(msg.data)), _now())
            said.append(("item", _item(item)))
        return said

    async def session_event(self, msg: Msg) -> list[tuple[str, dict]]:
        event = await self.tenant.backend.readable(_events.decode(msg.data))
        seq = msg.metadata.sequence.stream
        assert self.record is not None
        self.record = conversation_record([*self.record.events, (seq, event)])
        now = _now()
        items = [history.event_item(seq, event, self.labels, self.record, now)]
        if isinstance(event, ANSWERS):
            # What an answer changes in items shown before: the brief given or not, an
            # open's outcome as the machine finally had it.
            items += [history.event_item(s, e, self.labels, self.record, now)
                      for s, e in self.record.events
                      if s != seq and isinstance(e, (ev.SeedComposed, ev.Opened, ev.Relocated))]
        return [("item", _item(i)) for i in items] + [
            ("state", {"state": history.state_of(self.record)})]

    async def entry(self, msg: Msg) -> list[tuple[str, dict]]:
        row = await self.row(msg)
        if row is None or row.session_id != self.session_id:
            return []
        return [("item", _item(history.entry_item(row, _now())))]


def _item(item: history.Item) -> dict:
    return {"id": item.id, "key": item.key, "html": item.html}


class RepoFeed(Feed):
    """A repo's page: each entry as it is stored, and each open's card as it is answered
    (or corrected), for the conversations of that repo."""

    def __init__(self, tenant: Tenant, repo: str, start: Positions) -> None:
        super().__init__(tenant, start)
        self.repo = repo
        # Conversations found to be (or not to be) the platform's on this repo.
        self.mine: set[str] = set()
        self.others: set[str] = set()

    def subjects(self) -> dict[str, tuple[str, str, int]]:
        i, r = escape_token(self.tenant.instance_id), escape_token(self.repo)
        return {
            "sessions": (subjects.SESSIONS_STREAM, subjects.SESSION_EVENTS_ALL,
                         self.at.sessions),
            "timeline": (subjects.TIMELINE_STREAM, f"seedline.timeline.{i}.{r}.>",
                         self.at.timeline),
            "notices": (subjects.NOTICES_STREAM, subjects.notify_subject(
                self.tenant.instance_id), self.at.notices),
        }

    async def _is_mine(self, session_id: str) -> bool:
        """Whether the platform opened this conversation on this repo (its own events
        say; the answer is kept)."""
        if session_id in self.mine or session_id in self.others:
            return session_id in self.mine
        owner = await self.tenant.backend.owner(session_id)
        mine = owner is not None and (owner.instance_id, owner.repo) == (
            self.tenant.instance_id, self.repo)
        (self.mine if mine else self.others).add(session_id)
        return mine

    async def session_event(self, msg: Msg) -> list[tuple[str, dict]]:
        try:
            session_id = unescape_token(msg.subject.split(".")[2])
        except (TokenError, IndexError):
            return []
        kind = msg.subject.rsplit(".", 1)[-1]
        if kind not in ANSWER_TAGS or not await self._is_mine(session_id):
            return []
        record = await self.tenant.backend.conversation(session_id)
        now = _now()
        cards = []
        for view in record.opens:
            if not view.answered:
                continue
            card = render.open_card(render.OpenView(record_of(view), view.brief_text),
                                    self.labels, now)
            cards.append(("open", {"id": f"open-{view.answered_seq}", "session_id": session_id,
                                   "until": view.until_seq or 0, "html": card,
                                   "boundary": render.boundary(session_id, True)}))
        return cards

    async def entry(self, msg: Msg) -> list[tuple[str, dict]]:
        row = await self.row(msg)
        if row is None or row.session_id is None:
            return []
        platform = await self._is_mine(row.session_id)
        return [("entry", {"id": f"entry-{row.seq}", "seq": row.seq,
                           "session_id": row.session_id,
                           "html": render.entry_row(row, _now()),
                           "boundary": render.boundary(row.session_id, platform)})]


async def _merged(followed: dict[str, AsyncIterator[Msg | None]]
                  ) -> AsyncIterator[tuple[str, Msg] | None]:
    """The followed streams as one: None first once every consumer is in place, then each
    message with its stream's name as it comes, and None whenever one of them ticks."""
    queue: asyncio.Queue = asyncio.Queue(maxsize=512)

    async def pump(name: str, source: AsyncIterator[Msg | None]) -> None:
        try:
            async for msg in source:
                await queue.put((name, msg))
        except Exception as exc:
            await queue.put(("", exc))

    try:
        for source in followed.values():
            await source.__anext__()  # its consumer exists
        tasks = [asyncio.create_task(pump(n, s)) for n, s in followed.items()]
    except BaseException:
        for source in followed.values():
            await source.aclose()
        raise
    try:
        yield None
        while True:
            name, msg = await queue.get()
            if not name:
                raise msg
            yield None if msg is None else (name, msg)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for source in followed.values():
            await source.aclose()

