"""The resolver's conversations: a port, its Postgres adapter and an in-memory fake.

One row per conversation, keyed by its identity (instance, repo, session_id), never by
session_id alone (CONTRACT.md, Conventions): entries of another instance or repo that
use the same id are another conversation. A row holds what the continuity decision
needs: from SEEDLINE_TIMELINE its latest entry time, highest seq and the engine its
entries name; from SEEDLINE_SESSIONS, for conversations the platform opened, the
lifecycle of 4.1 folded by seedline_core.lifecycle (state, machine, engine, resume key,
when it was last confirmed) and the reply the machine's confirmation produced.
Both adapters pass tests/test_repository_contract.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import NamedTuple, Protocol

from seedline_contracts.times import parse_rfc3339
from seedline_core import lifecycle as lc
from seedline_core.decision import PreviousConversation, SavedRecord, Turn, newest_turn
from seedline_platform.lifecycle_events import saved_work_of



class TimelineFact(NamedTuple):
    seq: int
    instance_id: str
    repo: str
    session_id: str
    at: str  # its activity time: the earlier of `at` and acceptance (CONTRACT.md 3.1)
    engine: str | None
    kind: str | None = None
    excerpt: str = ""  # the content's first 200 characters, for turns alone


def as_fact(fact: tuple) -> TimelineFact:
    return fact if isinstance(fact, TimelineFact) else TimelineFact(*fact)


def with_entry(row: Row, fact: TimelineFact) -> Row:
    """The conversation's row after one more of its entries (entries come in seq order): its
    newest time and seq, the newest engine named, its newest turn."""
    moment = parse_rfc3339(fact.at)
    return replace(
        row,
        last_entry_at=max(moment, row.last_entry_at) if row.last_entry_at else moment,
        activity_seq=max(fact.seq, row.activity_seq),
        entry_engine=fact.engine or row.entry_engine,
        newest_turn=newest_turn(row.newest_turn, fact.seq, fact.kind or "", fact.excerpt),
    )


# (seq, session_id, event, reply to keep, request_id of that reply): the one reading of
# the stream, seedline_platform.lifecycle_events.Step.
LifecycleStep = tuple[int, str, lc.Event, bytes | None, str | None]


@dataclass(frozen=True)
class Row:
    instance_id: str
    repo: str
    session_id: str
    last_entry_at: datetime | None = None
    activity_seq: int = 0
    entry_engine: str | None = None
    platform: lc.Conversation | None = None
    last_reply: bytes | None = None
    # The newest chat_user or chat_assistant entry: a resume's `expect` (CONTRACT.md 6).
    newest_turn: Turn | None = None

    @property
    def last_activity(self) -> datetime | None:
        confirmed = self.platform.confirmed_at if self.platform else None
        times = [t for t in (self.last_entry_at, confirmed and parse_rfc3339(confirmed)) if t]
        return max(times) if times else None

    @property
    def may_be_earlier(self) -> bool:
        return lc.may_be_earlier(self.platform)

    def previous(self) -> PreviousConversation:
        p = self.platform
        saved = p.saved if p else None
        return PreviousConversation(
            session_id=self.session_id,
            last_activity_at=self.last_activity,
            engine=(p.engine if p and p.engine else None) or self.entry_engine,
            resume_key=p.resume_key if p else None,
            resume_node_id=p.resume_node_id if p else None,
            newest_turn=self.newest_turn,
            saved_record=saved_record(saved),
            saved=saved,
        )


def saved_record(saved: str | None) -> SavedRecord | None:
    """The engine's record a conversation's newest save holds, when it holds one."""
    work = saved_work_of(saved)
    record = work.worktree.engine_record if work is not None else None
    if record is None:
        return None
    return SavedRecord(work.node_id, record.engine, record.engine_session_id)


confirms = lc.confirms  # its reply is the conversation's current state (kept for relocate)
corrects = lc.corrects  # its reply replaces the one the open's request was answered with


def recency(row: Row) -> tuple:
    """Newest activity first; ties: the higher timeline seq, then the later open."""
    activity = row.last_activity
    return (activity is not None, activity or datetime.min, row.activity_seq,
            row.platform.created_seq if row.platform else 0, row.session_id)


class ConversationRepository(Protocol):
    async def apply_timeline(self, facts: Sequence[TimelineFact]) -> None:
        """Apply entries in stream order; seqs already applied change nothing."""
        ...

    async def apply_lifecycle(self, steps: Sequence[LifecycleStep], last_seq: int) -> None:
        """Fold session events in stream order, up to stream seq `last_seq`."""
        ...

    async def applied(self, projection: str) -> int: ...

    async def previous(self, instance_id: str, repo: str) -> PreviousConversation | None: ...

    async def platform(self, session_id: str) -> Row | None:
        """The conversation the platform opened with this id, or None."""
        ...

    async def platform_of_repo(self, instance_id: str, repo: str) -> list[lc.Conversation]: ...

    async def claim_request(self, instance_id: str, request_id: str, session_id: str) -> str | None:
        """Claim a request_id for session_id; when claimed before, the first claim's session."""
        ...

    async def claim_reading_repo(self, instance_id: str, repo: str, request_id: str,
                                 session_id: str) -> tuple[str | None, list[Row]]:
        """`claim_request`, and in the same read every conversation of the instance and
        repo, the platform's and the timeline's (a wake's claim and what it is decided on)."""
        ...

    async def reply_for_request(self, session_id: str) -> bytes | None: ...

    async def session_for_request(self, instance_id: str, request_id: str) -> str | None:
        """The conversation a request_id was claimed for, without claiming it."""
        ...

    async def rows(self) -> list[Row]:
        """Every row in identity order (for digests)."""
        ...

    async def reset(self) -> None:
        """Forget every projected row and offset (a rebuild); request claims stay."""
        ...


TIMELINE = "timeline"
SESSIONS = "sessions"


class InMemoryConversationRepository:
    def __init__(self) -> None:
        self.by_key: dict[tuple[str, str, str], Row] = {}
        self.offsets = {TIMELINE: 0, SESSIONS: 0}
        self.claims: dict[tuple[str, str], str] = {}
        self.request_replies: dict[tuple[str, str], bytes] = {}

    def _platform_key(self, session_id: str) -> tuple[str, str, str] | None:
        for key, row in self.by_key.items():
            if row.platform is not None and row.session_id == session_id:
                return key
        return None

    async def apply_timeline(self, facts: Sequence[TimelineFact]) -> None:
        for fact in map(as_fact, facts):
            if fact.seq <= self.offsets[TIMELINE]:
                continue
            key = (fact.instance_id, fact.repo, fact.session_id)
            self.by_key[key] = with_entry(self.by_key.get(key) or Row(*key), fact)
            self.offsets[TIMELINE] = fact.seq

    async def apply_lifecycle(self, steps: Sequence[LifecycleStep], last_seq: int) -> None:
        for seq, session_id, event, reply, request_id in steps:
            if seq <= self.offsets[SESSIONS]:
                continue
            key = self._platform_key(session_id)
            if key is None and isinstance(event, lc.Requested):
                key = (event.instance_id, event.repo, session_id)
            if key is not None:
                row = self.by_key.get(key) or Row(*key)
                after = lc.apply(row.platform, event)
                kept = reply if reply is not None and confirms(event) else row.last_reply
                self.by_key[key] = replace(row, platform=after, last_reply=kept)
            claim = (key[0], request_id) if key is not None else None
            if reply is not None and claim in self.claims:
                self.request_replies.setdefault(claim, reply)
            if reply is not None and corrects(event):
                for claimed, sid in self.claims.items():
                    if sid == session_id and claimed in self.request_replies:
                        self.request_replies[claimed] = reply
        self.offsets[SESSIONS] = max(self.offsets[SESSIONS], last_seq)

    async def applied(self, projection: str) -> int:
        return self.offsets[projection]

    async def previous(self, instance_id: str, repo: str) -> PreviousConversation | None:
        rows = [r for (i, p, _), r in self.by_key.items()
                if (i, p) == (instance_id, repo) and r.may_be_earlier]
        return max(rows, key=recency).previous() if rows else None

    async def platform(self, session_id: str) -> Row | None:
        key = self._platform_key(session_id)
        return self.by_key[key] if key else None

    async def platform_of_repo(self, instance_id: str, repo: str) -> list[lc.Conversation]:
        return [r.platform for (i, p, _), r in self.by_key.items()
                if (i, p) == (instance_id, repo) and r.platform is not None]


    async def claim_request(self, instance_id: str, request_id: str, session_id: str) -> str | None:
        if (instance_id, request_id) in self.claims:
            return self.claims[(instance_id, request_id)]
        self.claims[(instance_id, request_id)] = session_id
        return None

    async def claim_reading_repo(self, instance_id: str, repo: str, request_id: str,
                                 session_id: str) -> tuple[str | None, list[Row]]:
        first = await self.claim_request(instance_id, request_id, session_id)
        return first, [r for (i, p, _), r in sorted(self.by_key.items())
                       if (i, p) == (instance_id, repo)]

    async def session_for_request(self, instance_id: str, request_id: str) -> str | None:
        return self.claims.get((instance_id, request_id))

    async def reply_for_request(self, session_id: str) -> bytes | None:
        for claim, claimed in self.claims.items():
            if claimed == session_id and claim in self.request_replies:
                return self.request_replies[claim]
        return None

    async def rows(self) -> list[Row]:
        return [self.by_key[k] for k in sorted(self.by_key)]

    async def reset(self) -> None:
        self.by_key.clear()
        self.offsets = {TIMELINE: 0, SESSIONS: 0}
