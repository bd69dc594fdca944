"""ConversationRepository in Postgres: the resolver's own tables (DESIGN.md rule 8)."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import astuple, replace
from datetime import datetime, timezone

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from seedline_contracts.times import format_utc, parse_rfc3339
from seedline_core import lifecycle as lc
from seedline_core.decision import PreviousConversation, Turn
from seedline_platform import pg

from .repository import (
    SESSIONS,
    TIMELINE,
    LifecycleStep,
    Row,
    TimelineFact,
    as_fact,
    confirms,
    corrects,
    with_entry,
)

OFFSETS = pg.Offsets("resolver_offsets")

# A forgotten instance's rows (CONTRACT.md Erasure): dropped when the erasure is
# recorded and after every rebuild. First the lifecycle fold's offset row is written: the
# fold writes what it read without a lock (pg.Offsets.unmoved_since), and so puts back no
# row of a forgotten instance it read before the erasure.
FORGET_FIRST = (OFFSETS.touch_statement(SESSIONS),)
FORGET_STATEMENTS = (
    "DELETE FROM conversations WHERE instance_id = %s",
    "DELETE FROM open_requests WHERE instance_id = %s",
)

DDL = OFFSETS.ddl + """
CREATE TABLE IF NOT EXISTS conversations (
    instance_id text NOT NULL,
    repo text NOT NULL,
    session_id text NOT NULL,
    last_entry_at timestamptz,
    activity_seq bigint NOT NULL DEFAULT 0,
    entry_engine text,
    state text,
    created_seq bigint,
    node_id text,
    engine text,
    resume_key text,
    resume_node_id text,
    confirmed_at timestamptz,
    last_reply bytea,
    turn_seq bigint,
    turn_kind text,
    turn_excerpt text,
    last_activity timestamptz GENERATED ALWAYS AS (GREATEST(last_entry_at, confirmed_at)) STORED,
    PRIMARY KEY (instance_id, repo, session_id)
);
-- 1.2: the newest turn, a resume's expect (added to tables made before it).
ALTER TABLE conversations ADD COLUMN IF NOT EXISTS turn_seq bigint;
ALTER TABLE conversations ADD COLUMN IF NOT EXISTS turn_kind text;
ALTER TABLE conversations ADD COLUMN IF NOT EXISTS turn_excerpt text;
-- What its machine saved of its checkout when it last stopped (CONTRACT.md 6).
ALTER TABLE conversations ADD COLUMN IF NOT EXISTS saved text;
CREATE UNIQUE INDEX IF NOT EXISTS conversations_platform
    ON conversations (session_id) WHERE state IS NOT NULL;
CREATE INDEX IF NOT EXISTS conversations_recent
    ON conversations (instance_id, repo, last_activity DESC NULLS LAST, activity_seq DESC);
CREATE TABLE IF NOT EXISTS open_requests (
    instance_id text NOT NULL,
    request_id text NOT NULL,
    session_id text NOT NULL,
    reply bytea,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, request_id)
);
CREATE INDEX IF NOT EXISTS open_requests_session ON open_requests (session_id);
"""

_COLUMNS = (
    "instance_id, repo, session_id, last_entry_at, activity_seq, entry_engine, state, "
    "created_seq, node_id, engine, resume_key, resume_node_id, confirmed_at, last_reply, "
    "turn_seq, turn_kind, turn_excerpt, saved"
)

# The platform's conversations among some session ids, in the order given; locked
# (pg.Offsets.take_reading puts its gate in).
_TOUCHED = (
    f"SELECT {_COLUMNS} FROM conversations"
    " JOIN unnest(%s::text[]) WITH ORDINALITY AS w(session_id, n) USING (session_id)"
    " WHERE state IS NOT NULL")
_FOR_UPDATE = _TOUCHED + "{gate} ORDER BY w.n FOR UPDATE OF conversations"

# A request_id claimed (claimed now?) and every conversation of a repo, in one statement.
_CLAIM_READING_REPO = f"""
WITH claim AS (
    INSERT INTO open_requests (instance_id, request_id, session_id) VALUES (%s, %s, %s)
    ON CONFLICT DO NOTHING RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM claim), c.* FROM (SELECT 1) AS one
LEFT JOIN (SELECT {_COLUMNS} FROM conversations WHERE instance_id = %s AND repo = %s) AS c ON true
ORDER BY c.session_id
"""

# One row per conversation a batch of entries touches (_per_conversation), in one statement;
# {only} makes it change rows only when the offset was moved past none of them (pg.Offsets).
_UPSERT_ENTRIES_WHERE = """
INSERT INTO conversations (instance_id, repo, session_id, last_entry_at, activity_seq, entry_engine,
                           turn_seq, turn_kind, turn_excerpt)
SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::timestamptz[], %s::bigint[],
                     %s::text[], %s::bigint[], %s::text[], %s::text[]) {only}
ON CONFLICT (instance_id, repo, session_id) DO UPDATE SET
    last_entry_at = GREATEST(conversations.last_entry_at, EXCLUDED.last_entry_at),
    activity_seq = GREATEST(conversations.activity_seq, EXCLUDED.activity_seq),
    entry_engine = COALESCE(EXCLUDED.entry_engine, conversations.entry_engine),
    turn_seq = COALESCE(EXCLUDED.turn_seq, conversations.turn_seq),
    turn_kind = COALESCE(EXCLUDED.turn_kind, conversations.turn_kind),
    turn_excerpt = COALESCE(EXCLUDED.turn_excerpt, conversations.turn_excerpt)
"""
_UPSERT_ENTRIES = _UPSERT_ENTRIES_WHERE.format(only="")
_UPSERT_FRESH_ENTRIES = OFFSETS.moved_past() + _UPSERT_ENTRIES_WHERE.format(
    only="WHERE EXISTS (SELECT 1 FROM moved)")

# A conversation as the platform holds it (_platform_values), rows of them as an unnest, and
# their upsert: the lifecycle fold's write and the requests alone share them.
_PLATFORM_COLUMNS = ("instance_id, repo, session_id, state, created_seq, node_id, engine,"
                     " resume_key, resume_node_id, confirmed_at, last_reply, saved")
_PLATFORM_ROWS = f"""unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::bigint[],
                    %s::text[], %s::text[], %s::text[], %s::text[], %s::timestamptz[],
                    %s::bytea[], %s::text[]) AS u({_PLATFORM_COLUMNS})"""
_UPSERT_PLATFORM = """ON CONFLICT (instance_id, repo, session_id) DO UPDATE SET
    state = EXCLUDED.state, created_seq = EXCLUDED.created_seq, node_id = EXCLUDED.node_id,
    engine = EXCLUDED.engine, resume_key = EXCLUDED.resume_key,
    resume_node_id = EXCLUDED.resume_node_id, confirmed_at = EXCLUDED.confirmed_at,
    last_reply = COALESCE(EXCLUDED.last_reply, conversations.last_reply),
    saved = EXCLUDED.saved"""

# What a lifecycle batch changed, in one statement: each open request's first reply (instance,
# request_id, reply), kept where none was, and each conversation written; {only} makes each
# write only when the offset's row was as the batch read it (pg.Offsets.unmoved_since).
_ANSWERED = """
    UPDATE open_requests AS o SET reply = a.reply
    FROM unnest(%s::text[], %s::text[], %s::bytea[]) AS a(instance_id, request_id, reply)
    WHERE o.instance_id = a.instance_id AND o.request_id = a.request_id AND o.reply IS NULL
    {only}
"""
_PLATFORM_WRITE = f"""
INSERT INTO conversations ({_PLATFORM_COLUMNS})
SELECT u.* FROM {_PLATFORM_ROWS} {{only}}
{_UPSERT_PLATFORM}
"""
# In a transaction that holds the offset.
_WRITE_BATCH = (f"WITH answered AS ({_ANSWERED.format(only='')})"
                + _PLATFORM_WRITE.format(only=""))
# Autocommitted after a read with no lock: moved?
_WRITE_UNMOVED = (OFFSETS.unmoved_since()
                  + f", answered AS ({_ANSWERED.format(only='AND EXISTS (SELECT 1 FROM moved)')}),"
                  + " written AS ("
                  + _PLATFORM_WRITE.format(only="WHERE EXISTS (SELECT 1 FROM moved)")
                  + f" RETURNING 1) SELECT EXISTS (SELECT 1 FROM moved), {OFFSETS.version_left}")


# Requests alone (_requests_alone): the offset moved past a batch none of which was applied,
# and each requested conversation made where the platform holds none of that id (a timeline
# row of it takes the platform's columns); moved?, the ids made, and the offset row's version
# found and left (pg.KeptRows).
_MAKE_REQUESTED = OFFSETS.moved_past() + f"""
, made AS (
    INSERT INTO conversations ({_PLATFORM_COLUMNS})
    SELECT u.* FROM {_PLATFORM_ROWS}
    WHERE EXISTS (SELECT 1 FROM moved) AND NOT EXISTS (
        SELECT 1 FROM conversations c WHERE c.session_id = u.session_id AND c.state IS NOT NULL)
    {_UPSERT_PLATFORM}
    -- Checked on the row as it is now: a statement that waited for the offset's lock reads
    -- with the snapshot it began with, so NOT EXISTS above misses a conversation the copy
    -- it waited for made meanwhile.
    WHERE conversations.state IS NULL
    RETURNING session_id
)
SELECT EXISTS (SELECT 1 FROM moved), ARRAY(SELECT session_id FROM made),
    (SELECT version::text FROM was), {OFFSETS.version_left}
"""


def _platform_values(row: Row, kept: bytes | None) -> tuple:
    """A conversation as the platform holds it, as _PLATFORM_COLUMNS."""
    after = row.platform
    return (row.instance_id, row.repo, row.session_id, after.state.value, after.created_seq,
            after.node_id, after.engine, after.resume_key, after.resume_node_id,
            after.confirmed_at, kept, after.saved)


def _per_conversation(facts: Sequence[TimelineFact]) -> list[tuple]:
    """The batch folded per conversation as the in-memory repository folds it (with_entry),
    as the upsert's columns, in the order each was first touched: one statement for the
    batch, its rows locked in the order they were before. What the rows already hold the
    upsert keeps where the batch says nothing newer."""
    rows: dict[tuple[str, str, str], Row] = {}
    for f in sorted(facts, key=lambda fact: fact.seq):
        key = (f.instance_id, f.repo, f.session_id)
        rows[key] = with_entry(rows.get(key) or Row(*key), f)
    return [(r.instance_id, r.repo, r.session_id, r.last_entry_at, r.activity_seq,
             r.entry_engine, *(astuple(r.newest_turn) if r.newest_turn else (None,) * 3))
            for r in rows.values()]


def _as_read(row: Row) -> tuple:
    """A platform conversation as _TOUCHED reads it, for what the lifecycle fold keeps
    (pg.KeptRows): the timeline's columns as the fold found them, or empty in a row it made,
    since that fold neither reads nor writes them (the timeline's fold does)."""
    p = row.platform
    assert p is not None
    confirmed = parse_rfc3339(p.confirmed_at) if p.confirmed_at else None
    turn = astuple(row.newest_turn) if row.newest_turn else (None,) * 3
    return (row.instance_id, row.repo, row.session_id, row.last_entry_at, row.activity_seq,
            row.entry_engine, p.state.value, p.created_seq, p.node_id, p.engine, p.resume_key,
            p.resume_node_id, confirmed, row.last_reply, *turn, p.saved)


def _utc(moment: datetime | None) -> datetime | None:
    return moment.astimezone(timezone.utc) if moment else None


def _row(values: Sequence) -> Row:
    (instance_id, repo, session_id, last_entry_at, activity_seq, entry_engine, state,
     created_seq, node_id, engine, resume_key, resume_node_id, confirmed_at, last_reply,
     turn_seq, turn_kind, turn_excerpt, saved) = values
    platform = None
    if state is not None:
        platform = lc.Conversation(
            session_id, instance_id, repo, lc.State(state), int(created_seq), node_id, engine,
            resume_key, resume_node_id, format_utc(confirmed_at) if confirmed_at else None,
            saved=saved,
        )
    turn = Turn(int(turn_seq), turn_kind, turn_excerpt) if turn_seq is not None else None
    return Row(instance_id, repo, session_id, _utc(last_entry_at), int(activity_seq),
               entry_engine, platform, bytes(last_reply) if last_reply is not None else None,
               turn)


async def _claimed_by(conn: AsyncConnection, instance_id: str, request_id: str) -> str | None:
    """The conversation the first claim of a request_id was made for (None: no claim)."""
    cur = await conn.execute(
        "SELECT session_id FROM open_requests WHERE instance_id = %s AND request_id = %s",
        (instance_id, request_id),
    )
    found = await cur.fetchone()
    return found[0] if found else None


# A reply replacing the one kept for a conversation, and an open request's first reply.
_CORRECT_REPLY = ("UPDATE open_requests SET reply = %s WHERE session_id = %s"
                  " AND reply IS NOT NULL")
_FIRST_REPLY = ("UPDATE open_requests SET reply = %s WHERE instance_id = %s"
                " AND request_id = %s AND reply IS NULL")


class _Folded:
    """A lifecycle batch folded onto the platform's conversations it touches as read
    (`found`) past the offset (`applied`): each conversation written once, after its last
    step (a storm's batch holds several events of one), with what it keeps of the replies,
    and each open request's first reply. `in_order`: the replies are written a statement at
    a time, in the batch's order (`self.in_order`), not with the rows."""

    def __init__(self, applied: int, found: list[tuple], steps: Sequence[LifecycleStep],
                 in_order: bool) -> None:
        rows = {row.session_id: row for row in map(_row, found)}
        self.rows = rows
        self.written: dict[str, bytes | None] = {}  # what each keeps of the replies
        # Each open request's first reply: the one a later reply of it finds kept.
        self.answers: dict[tuple[str, str], bytes] = {}
        self.in_order: list[tuple[str, tuple]] = []
        for seq, session_id, event, reply, request_id in steps:
            if seq <= applied:
                continue
            row = rows.get(session_id)
            if row is None and isinstance(event, lc.Requested):
                row = Row(event.instance_id, event.repo, session_id)
            if row is None:
                continue
            after = lc.apply(row.platform, event)
            kept = reply if reply is not None and confirms(event) else None
            if after is not None and (after != row.platform or kept is not None):
                rows[session_id] = replace(row, platform=after)
                self.written[session_id] = (kept if kept is not None
                                            else self.written.get(session_id))
            if in_order and reply is not None and corrects(event):
                self.in_order.append((_CORRECT_REPLY, (reply, session_id)))
            if reply is not None and request_id is not None:
                if in_order:
                    self.in_order.append((_FIRST_REPLY, (reply, row.instance_id, request_id)))
                else:
                    self.answers.setdefault((row.instance_id, request_id), reply)

    @property
    def changes(self) -> bool:
        return bool(self.written or self.answers)

    @property
    def rows_after(self) -> dict[str, tuple]:
        """Each platform conversation read or made, as the batch left it (pg.KeptRows)."""
        return {session_id: _as_read(row) for session_id, row in self.rows.items()
                if row.platform is not None}

    @property
    def columns(self) -> tuple:
        """The write's parameters (_ANSWERED's, then _PLATFORM_WRITE's)."""
        return (*pg.columns([(*key, reply) for key, reply in self.answers.items()], 3),
                *pg.columns([_platform_values(self.rows[session_id], kept)
                             for session_id, kept in self.written.items()], 12))


class PostgresConversationRepository:
    """On its pool, or bound to one connection whose transaction it then joins (a rebuild)."""

    def __init__(self, pool: AsyncConnectionPool, conn: AsyncConnection | None = None,
                 keyed: AsyncConnectionPool | None = None) -> None:
        self._pool = pool
        self._conn = conn
        # The folds' statements find rows by key alone: on `keyed`, planned once (pg.open_pool).
        self._folds = keyed or pool
        # The platform's conversations this copy's lifecycle fold last read or wrote: the
        # next batch of them is folded with no read while no other transaction wrote the
        # offset (pg.KeptRows); none kept in a rebuild's transaction.
        self._kept = pg.KeptRows() if conn is None else None

    @asynccontextmanager
    async def _connection(self, fold: bool = False) -> AsyncIterator[AsyncConnection]:
        if self._conn is not None:
            yield self._conn
        else:
            async with (self._folds if fold else self._pool).connection() as conn:
                yield conn

    async def setup(self) -> None:
        await pg.apply_schema(self._pool, "continuity-resolver", DDL)

    async def apply_timeline(self, facts: Sequence[TimelineFact]) -> None:
        facts = list(map(as_fact, facts))
        if facts:  # almost always none of it applied yet: one statement does it all
            seqs = [f.seq for f in facts]
            async with self._connection(fold=True) as conn:
                cur = await conn.execute(_UPSERT_FRESH_ENTRIES, (
                    TIMELINE, max(seqs), TIMELINE, min(seqs),
                    *pg.columns(_per_conversation(facts), 9)))
                if cur.rowcount:
                    return
        async with self._connection(fold=True) as conn, conn.transaction():
            applied = await OFFSETS.take(conn, TIMELINE, max((f.seq for f in facts), default=0))
            fresh = [f for f in facts if f.seq > applied]
            if not fresh:
                return
            await conn.execute(_UPSERT_ENTRIES, pg.columns(_per_conversation(fresh), 9))

    async def apply_lifecycle(self, steps: Sequence[LifecycleStep], last_seq: int) -> None:
        if not steps:
            async with self._connection(fold=True) as conn:
                moved = await OFFSETS.advance(conn, SESSIONS, last_seq)
            if self._kept is not None:
                self._kept.wrote(*moved, last_seq)
            return
        if all(isinstance(step[2], lc.Requested) for step in steps) \
                and await self._requests_alone(steps, last_seq):
            return
        touched = (list(dict.fromkeys(step[1] for step in steps)),)
        # A reply that replaces the one kept (the machine's final word) needs the replies
        # before it written first: such a batch is written a statement at a time, under the
        # offset's lock. Any other, most often, in two round trips and no transaction: the
        # rows read with the offset, and what the batch changed written once the offset's
        # row is found as it was read.
        in_order = any(step[3] is not None and corrects(step[2]) for step in steps)
        if not in_order and self._kept is not None:
            async with self._connection(fold=True) as conn:
                if await OFFSETS.fold_unlocked(
                        conn, SESSIONS, last_seq, _TOUCHED, touched,
                        lambda applied, found: _Folded(applied, found, steps, in_order=False),
                        _WRITE_UNMOVED, self._kept, touched[0]) is not None:
                    return
        if self._kept is not None:
            self._kept.let_go()
        # Another copy's batch, a rebuild or an erasure came between, or the batch corrects
        # a reply: read and written under the offset's lock. The platform's conversations
        # the batch touches are locked with the offset, in the order the batch first
        # touches them: the order a batch of the timeline fold locks them in too (by seq),
        # so the two folds seldom wait on each other crosswise.
        async with self._connection(fold=True) as conn, conn.transaction():
            applied, found = await OFFSETS.take_reading(
                conn, SESSIONS, last_seq, _FOR_UPDATE, touched)
            folded = _Folded(applied, found, steps, in_order)
            for statement, params in folded.in_order:
                await conn.execute(statement, params)
            if folded.changes:
                await conn.execute(_WRITE_BATCH, folded.columns)

    async def _requests_alone(self, steps: Sequence[LifecycleStep], last_seq: int) -> bool:
        """A batch of requests alone (every open's first event) in one autocommitted
        statement, with no read: a request makes its conversation when the platform holds
        none and changes nothing otherwise (lifecycle.apply). False when part of the batch
        was applied before: the caller folds it in a transaction."""
        requested: dict[str, Row] = {}
        for _, session_id, event, _, _ in steps:
            if session_id not in requested:
                c = lc.apply(None, event)
                requested[session_id] = Row(c.instance_id, c.repo, c.session_id, platform=c)
        async with self._connection(fold=True) as conn:
            cur = await conn.execute(_MAKE_REQUESTED, (
                SESSIONS, last_seq, SESSIONS, min(step[0] for step in steps),
                *pg.columns([_platform_values(row, None) for row in requested.values()], 12)))
            moved, made, was, now = await cur.fetchone()
        if moved and self._kept is not None:
            self._kept.wrote(was, now, last_seq,
                             {session_id: _as_read(requested[session_id]) for session_id in made})
        return moved

    async def applied(self, projection: str) -> int:
        async with self._connection() as conn:
            return await OFFSETS.read(conn, projection)

    async def previous(self, instance_id: str, repo: str) -> PreviousConversation | None:
        async with self._connection() as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM conversations WHERE instance_id = %s AND repo = %s"
                " AND state IS DISTINCT FROM 'failed'"  # never the earlier one (3.1)
                " ORDER BY last_activity DESC NULLS LAST, activity_seq DESC,"
                " created_seq DESC NULLS LAST, session_id DESC LIMIT 1",
                (instance_id, repo),
            )
            found = await cur.fetchone()
        return _row(found).previous() if found else None

    async def platform(self, session_id: str) -> Row | None:
        async with self._connection() as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM conversations WHERE session_id = %s"
                " AND state IS NOT NULL",
                (session_id,),
            )
            found = await cur.fetchone()
        return _row(found) if found else None

    async def platform_of_repo(self, instance_id: str, repo: str) -> list[lc.Conversation]:
        async with self._connection() as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM conversations WHERE instance_id = %s AND repo = %s"
                " AND state IS NOT NULL",
                (instance_id, repo),
            )
            return [_row(r).platform for r in await cur.fetchall()]

    async def claim_request(self, instance_id: str, request_id: str, session_id: str) -> str | None:
        async with self._connection() as conn:
            cur = await conn.execute(
                "INSERT INTO open_requests (instance_id, request_id, session_id) VALUES (%s, %s, %s)"
                " ON CONFLICT DO NOTHING RETURNING session_id",
                (instance_id, request_id, session_id),
            )
            if await cur.fetchone():
                return None
            return await _claimed_by(conn, instance_id, request_id)

    async def claim_reading_repo(self, instance_id: str, repo: str, request_id: str,
                                 session_id: str) -> tuple[str | None, list[Row]]:
        async with self._connection() as conn:
            cur = await conn.execute(_CLAIM_READING_REPO, (
                instance_id, request_id, session_id, instance_id, repo))
            found = await cur.fetchall()
            rows = [_row(values[1:]) for values in found if values[1] is not None]
            if found[0][0]:
                return None, rows
            return await _claimed_by(conn, instance_id, request_id), rows

    async def session_for_request(self, instance_id: str, request_id: str) -> str | None:
        async with self._connection() as conn:
            return await _claimed_by(conn, instance_id, request_id)

    async def reply_for_request(self, session_id: str) -> bytes | None:
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT reply FROM open_requests WHERE session_id = %s AND reply IS NOT NULL",
                (session_id,),
            )
            found = await cur.fetchone()
        return bytes(found[0]) if found else None

    async def rows(self) -> list[Row]:
        async with self._connection() as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM conversations ORDER BY instance_id, repo, session_id"
            )
            return [_row(r) for r in await cur.fetchall()]

    async def reset(self) -> None:
        async with self._connection() as conn, conn.transaction():
            await conn.execute("DELETE FROM conversations")
            for projection in (TIMELINE, SESSIONS):
                await OFFSETS.lock(conn, projection)
                await conn.execute(
                    f"UPDATE {OFFSETS.table} SET applied_seq = 0 WHERE projection = %s",
                    (projection,),
                )


def digest_rows(rows: Sequence[Row]) -> str:
    """Equal digests, equal projections: every field of every row, in identity order."""
    h = hashlib.sha256()
    for row in rows:
        h.update(repr(row).encode())
    return h.hexdigest()
