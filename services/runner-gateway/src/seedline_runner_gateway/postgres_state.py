"""GatewayState in Postgres: the gateway's own tables (DESIGN.md rule 8)."""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta, timezone

from psycopg_pool import AsyncConnectionPool

from seedline_contracts.times import format_utc, parse_rfc3339
from seedline_core import lifecycle as lc
from seedline_platform import pg

from .state import (
    AtLaunch,
    Folded,
    Held,
    RepoNow,
    Step,
    fold,
    opened_where,
    tells_not_woken,
)

OFFSETS = pg.Offsets("gateway_offsets")
PROJECTION = "sessions"

DDL = OFFSETS.ddl + """
CREATE TABLE IF NOT EXISTS gateway_conversations (
    session_id text PRIMARY KEY,
    instance_id text NOT NULL,
    repo text NOT NULL,
    state text NOT NULL,
    created_seq bigint NOT NULL,
    node_id text,
    engine text,
    confirmed_at timestamptz,
    last_activity timestamptz,
    outcome text
);
-- 1.2: the last launch's outcome as the machine finally had it (added to older tables).
ALTER TABLE gateway_conversations ADD COLUMN IF NOT EXISTS outcome text;
-- 1.3: the engine's own id and where, so an engine_bound that `opened` already records is
-- not recorded again.
ALTER TABLE gateway_conversations ADD COLUMN IF NOT EXISTS resume_key text;
ALTER TABLE gateway_conversations ADD COLUMN IF NOT EXISTS resume_node_id text;
CREATE INDEX IF NOT EXISTS gateway_conversations_current
    ON gateway_conversations (instance_id, repo, created_seq) WHERE state IN ('live', 'opening');
CREATE INDEX IF NOT EXISTS gateway_conversations_repo
    ON gateway_conversations (instance_id, repo, created_seq);
-- What one machine hosts, read on each of its presence puts (a put per launch and stop).
CREATE INDEX IF NOT EXISTS gateway_conversations_live_node
    ON gateway_conversations (node_id, created_seq) WHERE state = 'live';
CREATE TABLE IF NOT EXISTS machines (
    node_id text PRIMARY KEY,
    label text NOT NULL
);
-- The not_woken notice last told per repo (CONTRACT.md 4: one per burst).
CREATE TABLE IF NOT EXISTS not_woken_told (
    instance_id text NOT NULL,
    repo text NOT NULL,
    told_at timestamptz NOT NULL,
    entry_id text NOT NULL,
    PRIMARY KEY (instance_id, repo)
);
CREATE TABLE IF NOT EXISTS last_opens (
    instance_id text NOT NULL,
    repo text NOT NULL,
    node_id text NOT NULL,
    engine text NOT NULL,
    PRIMARY KEY (instance_id, repo)
);
"""

_COLUMNS = ("session_id, instance_id, repo, state, created_seq, node_id, engine, confirmed_at,"
            " last_activity, outcome, resume_key, resume_node_id")
# The conversations a fold batch touches; locked (pg.Offsets.take_reading puts its gate in).
_TOUCHED = f"SELECT {_COLUMNS} FROM gateway_conversations WHERE session_id = ANY(%s)"
_FOR_UPDATE = _TOUCHED + "{gate} FOR UPDATE"

# Conversations (_values) as an unnest of _COLUMNS: the fold's write and the requests alone.
_ROWS = """unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::bigint[], %s::text[],
              %s::text[], %s::timestamptz[], %s::timestamptz[], %s::text[], %s::text[],
              %s::text[])"""

# What a batch changed: each repo's last successful open (instance, repo, node, engine; one
# row per repo) and each conversation changed (one row each); {only} makes each write only
# when the offset's row was as the batch read it (pg.Offsets.unmoved_since).
_OPENS_WRITE = """
    INSERT INTO last_opens
    SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[]) {only}
    ON CONFLICT (instance_id, repo) DO UPDATE SET node_id = EXCLUDED.node_id,
        engine = EXCLUDED.engine
"""
_CONVERSATIONS_WRITE = f"""
INSERT INTO gateway_conversations ({_COLUMNS})
SELECT * FROM {_ROWS} {{only}}
ON CONFLICT (session_id) DO UPDATE SET state = EXCLUDED.state, node_id = EXCLUDED.node_id,
    engine = EXCLUDED.engine, confirmed_at = EXCLUDED.confirmed_at, outcome = EXCLUDED.outcome,
    resume_key = EXCLUDED.resume_key, resume_node_id = EXCLUDED.resume_node_id,
    -- Kept where newer: the timeline follower moves it without the offset (touch).
    last_activity = GREATEST(gateway_conversations.last_activity, EXCLUDED.last_activity)
"""
# In a transaction that holds the offset.
_WRITE = (f"WITH opens AS ({_OPENS_WRITE.format(only='')})"
          + _CONVERSATIONS_WRITE.format(only=""))
# Autocommitted after a read with no lock: moved?
_ONLY_UNMOVED = "WHERE EXISTS (SELECT 1 FROM moved)"
_WRITE_UNMOVED = (OFFSETS.unmoved_since()
                  + f", opens AS ({_OPENS_WRITE.format(only=_ONLY_UNMOVED)}),"
                  + f" written AS ({_CONVERSATIONS_WRITE.format(only=_ONLY_UNMOVED)} RETURNING 1)"
                  + f" SELECT EXISTS (SELECT 1 FROM moved), {OFFSETS.version_left}")


# Requests alone (_requests_alone): the offset moved past a batch none of which was applied,
# and the conversations it asks for made where none is held; (moved?, the ids made, the
# offset row's version found and left: pg.KeptRows).
_MAKE_REQUESTED = OFFSETS.moved_past() + f"""
, made AS (
    INSERT INTO gateway_conversations ({_COLUMNS})
    SELECT * FROM {_ROWS}
    WHERE EXISTS (SELECT 1 FROM moved)
    ON CONFLICT (session_id) DO NOTHING
    RETURNING session_id
)
SELECT EXISTS (SELECT 1 FROM moved), ARRAY(SELECT session_id FROM made),
    (SELECT version::text FROM was), {OFFSETS.version_left}
"""


# A launch's read (GatewayState.at_launch): the repo's newest opens, with the conversation
# launched and the repo's live ones (none of either: one row of nulls).
_AT_LAUNCH = f"""
SELECT m.newest, m.not_failed, {", ".join("c." + name.strip() for name in _COLUMNS.split(","))}
FROM (SELECT max(created_seq) AS newest,
             max(created_seq) FILTER (WHERE state <> 'failed') AS not_failed
      FROM gateway_conversations WHERE instance_id = %(instance)s AND repo = %(repo)s) AS m
LEFT JOIN gateway_conversations AS c ON c.session_id = %(session)s
    OR (c.instance_id = %(instance)s AND c.repo = %(repo)s AND c.state = 'live')
ORDER BY c.created_seq
"""


# What a person's message finds of its repo (GatewayState.repo_now), as one row, with the
# fold's offset as this read found it.
_REPO_NOW = f"""
SELECT (SELECT applied_seq FROM {OFFSETS.table} WHERE projection = %(projection)s),
    o.node_id, o.engine, c.*
FROM (SELECT 1) AS one
LEFT JOIN last_opens AS o ON o.instance_id = %(instance)s AND o.repo = %(repo)s
LEFT JOIN LATERAL (
    SELECT {_COLUMNS} FROM gateway_conversations
    WHERE instance_id = %(instance)s AND repo = %(repo)s AND state IN ('live', 'opening')
    ORDER BY created_seq DESC LIMIT 1) AS c ON true
"""


def _values(held: Held) -> tuple:
    """A conversation as the columns of _COLUMNS, as a read of them finds them."""
    c = held.conversation
    confirmed = parse_rfc3339(c.confirmed_at) if c.confirmed_at else None
    return (c.session_id, c.instance_id, c.repo, c.state.value, c.created_seq, c.node_id,
            c.engine, confirmed, held.last_activity, c.outcome, c.resume_key,
            c.resume_node_id)


def _held(row: Sequence) -> Held:
    (session_id, instance_id, repo, state, created_seq, node_id, engine, confirmed, activity,
     outcome, resume_key, resume_node_id) = row
    conversation = lc.Conversation(
        session_id, instance_id, repo, lc.State(state), int(created_seq), node_id, engine,
        resume_key=resume_key, resume_node_id=resume_node_id,
        confirmed_at=format_utc(confirmed) if confirmed else None, outcome=outcome,
    )
    return Held(conversation, activity.astimezone(timezone.utc) if activity else None)


class _Folded:
    """A batch folded onto the rows it touches as read (`found`) past the offset (`applied`):
    each row read once and written once, a storm's batch holding several events of one."""

    def __init__(self, applied: int, found: list[tuple], steps: Sequence[Step]) -> None:
        self._found = {row[0]: row for row in found}
        rows = {held.session_id: held for held in map(_held, found)}
        fresh = [step for step in steps if step[0] > applied]
        self.changed: dict[str, Held] = {}
        self.opens: dict[tuple[str, str], tuple[str, str]] = {}  # the last of each repo's
        for step in fresh:
            before = rows.get(step[1])
            held = fold(before, step)
            if held is None or held == before:
                continue
            rows[step[1]] = self.changed[step[1]] = held
            where = opened_where(step, held)
            if where:
                self.opens[(held.conversation.instance_id, held.conversation.repo)] = where
        self.result: Folded = {step[1]: rows.get(step[1]) for step in fresh}

    @property
    def changes(self) -> bool:
        return bool(self.changed)

    @functools.cached_property
    def _written(self) -> dict[str, tuple]:
        """Each conversation changed, as _COLUMNS: both what is written and what is kept."""
        return {session_id: _values(held) for session_id, held in self.changed.items()}

    @property
    def rows_after(self) -> dict[str, tuple]:
        """Each row read, as the batch left it (pg.KeptRows). A row's last_activity may be
        older than the table's (`touch` moves it alone): the write keeps the newer, and no
        fold reads it."""
        return self._found | self._written

    @property
    def columns(self) -> tuple:
        """The write's parameters (_OPENS_WRITE's, then _CONVERSATIONS_WRITE's)."""
        return (*pg.columns([(*repo, *where) for repo, where in self.opens.items()], 4),
                *pg.columns(list(self._written.values()), 12))


class PostgresGatewayState:
    def __init__(self, pool: AsyncConnectionPool,
                 keyed: AsyncConnectionPool | None = None) -> None:
        self._pool = pool
        # The fold's statements find rows by key alone: on `keyed`, planned once (pg.open_pool).
        self._folds = keyed or pool
        # The conversations this copy's fold last read or wrote: the next batch of them is
        # folded with no read while no other transaction wrote the offset (pg.KeptRows).
        self._kept = pg.KeptRows()

    async def setup(self) -> None:
        await pg.apply_schema(self._pool, "runner-gateway", DDL)

    async def apply_lifecycle(self, steps: Sequence[Step], last_seq: int) -> Folded:
        if not steps:
            async with self._folds.connection() as conn:
                self._kept.wrote(*await OFFSETS.advance(conn, PROJECTION, last_seq), last_seq)
            return {}
        if all(isinstance(step[2], lc.Requested) for step in steps):
            made = await self._requests_alone(steps, last_seq)
            if made is not None:
                return made
        touched = (sorted({step[1] for step in steps}),)
        # Two round trips and no transaction, most often: the rows read with the offset (or
        # as this copy's last write left them), and what the batch changed written once the
        # offset's row is found as it was read.
        async with self._folds.connection() as conn:
            folded = await OFFSETS.fold_unlocked(
                conn, PROJECTION, last_seq, _TOUCHED, touched,
                lambda applied, found: _Folded(applied, found, steps), _WRITE_UNMOVED,
                self._kept, touched[0])
        if folded is not None:
            return folded.result
        # Another copy's batch, a rebuild or an erasure came between: read and written again
        # under the offset's lock, the rows locked with it.
        self._kept.let_go()
        async with self._folds.connection() as conn, conn.transaction():
            applied, found = await OFFSETS.take_reading(
                conn, PROJECTION, last_seq, _FOR_UPDATE, touched)
            folded = _Folded(applied, found, steps)
            if folded.changes:
                await conn.execute(_WRITE, folded.columns)
        return folded.result

    async def _requests_alone(self, steps: Sequence[Step], last_seq: int) -> Folded | None:
        """A batch of requests alone (every open's first event) in one autocommitted
        statement: a request makes its conversation when none is held and changes nothing
        otherwise (lifecycle.apply), so the rows are inserted where none are, with no read.
        Returns the conversations made (one already held is left out: not read, it is not
        vouched for); None when part of the batch was applied before (the caller folds it
        in a transaction)."""
        first: dict[str, Held] = {}
        for step in steps:
            if step[1] not in first:
                first[step[1]] = fold(None, step)
        async with self._folds.connection() as conn:
            cur = await conn.execute(_MAKE_REQUESTED, (
                PROJECTION, last_seq, PROJECTION, min(step[0] for step in steps),
                *pg.columns([_values(held) for held in first.values()], 12)))
            moved, made, was, now = await cur.fetchone()
        if not moved:
            return None
        self._kept.wrote(was, now, last_seq,
                         {session_id: _values(first[session_id]) for session_id in made})
        return {session_id: first[session_id] for session_id in made}

    async def applied(self) -> int:
        async with pg.reading(self._pool) as conn:
            return await OFFSETS.read(conn, PROJECTION)

    async def _some(self, where: str, params: tuple) -> list[Held]:
        async with pg.reading(self._pool) as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM gateway_conversations WHERE {where}", params
            )
            return [_held(row) for row in await cur.fetchall()]

    async def held(self, session_id: str) -> Held | None:
        found = await self._some("session_id = %s", (session_id,))
        return found[0] if found else None

    async def of_repo(self, instance_id: str, repo: str, session_ids: set[str]) -> list[Held]:
        if not session_ids:
            return []
        return await self._some(
            "session_id = ANY(%s) AND instance_id = %s AND repo = %s ORDER BY session_id",
            (sorted(session_ids), instance_id, repo))

    async def repo_now(self, instance_id: str, repo: str) -> RepoNow:
        async with pg.reading(self._pool) as conn:
            cur = await conn.execute(_REPO_NOW, {"instance": instance_id, "repo": repo,
                                                 "projection": PROJECTION})
            applied, node_id, engine, *current = await cur.fetchone()
        return RepoNow(None if current[0] is None else _held(current),
                       None if node_id is None else (node_id, engine), int(applied or 0))

    async def at_launch(self, session_id: str, instance_id: str, repo: str) -> AtLaunch:
        async with pg.reading(self._pool) as conn:
            cur = await conn.execute(_AT_LAUNCH, {"instance": instance_id, "repo": repo,
                                                  "session": session_id})
            rows = await cur.fetchall()
        found = [_held(row[2:]) for row in rows if row[2] is not None]
        newest, not_failed = rows[0][:2]
        return AtLaunch(
            next((h for h in found if h.session_id == session_id), None),
            None if newest is None else int(newest),
            None if not_failed is None else int(not_failed),
            [h for h in found if h.state is lc.State.LIVE
             and (h.conversation.instance_id, h.conversation.repo) == (instance_id, repo)])

    async def all_live(self, instance_id: str | None = None) -> list[Held]:
        if instance_id is None:
            return await self._some("state = 'live' ORDER BY created_seq", ())
        return await self._some(
            "state = 'live' AND instance_id = %s ORDER BY created_seq", (instance_id,)
        )

    async def live_on(self, node_id: str, besides: Collection[str] = ()) -> list[Held]:
        if not besides:
            return await self._some("state = 'live' AND node_id = %s ORDER BY created_seq",
                                    (node_id,))
        return await self._some(
            "state = 'live' AND node_id = %s AND NOT (session_id = ANY(%s)) ORDER BY created_seq",
            (node_id, sorted(besides)))

    async def hosting_nodes(self) -> set[str]:
        async with pg.reading(self._pool) as conn:
            cur = await conn.execute(
                "SELECT DISTINCT node_id FROM gateway_conversations"
                " WHERE state = 'live' AND node_id IS NOT NULL")
            return {row[0] for row in await cur.fetchall()}

    async def live_in_repo(self, instance_id: str, repo: str) -> list[Held]:
        return await self._some(
            "state = 'live' AND instance_id = %s AND repo = %s ORDER BY created_seq",
            (instance_id, repo),
        )

    async def touch(self, activity: dict[str, datetime]) -> None:
        if not activity:
            return
        async with self._pool.connection() as conn:
            await conn.execute(  # one statement for the batch, however many it touches
                "UPDATE gateway_conversations AS g SET last_activity ="
                " GREATEST(g.last_activity, a.at)"
                " FROM unnest(%s::text[], %s::timestamptz[]) AS a(session_id, at)"
                " WHERE g.session_id = a.session_id AND g.state = 'live'",
                (list(activity), list(activity.values())),
            )

    async def idle_since(self, cutoff: datetime) -> list[Held]:
        return await self._some("state = 'live' AND last_activity < %s", (cutoff,))

    async def record_machine(self, node_id: str, label: str) -> None:
        async with self._pool.connection() as conn:
            await conn.execute(
                "INSERT INTO machines VALUES (%s, %s) ON CONFLICT (node_id) DO UPDATE"
                " SET label = EXCLUDED.label WHERE machines.label <> EXCLUDED.label",
                (node_id, label),
            )

    async def label(self, node_id: str) -> str | None:
        async with pg.reading(self._pool) as conn:
            cur = await conn.execute("SELECT label FROM machines WHERE node_id = %s", (node_id,))
            row = await cur.fetchone()
        return row[0] if row else None

    async def tell_not_woken(self, instance_id: str, repo: str, at: datetime, entry_id: str,
                             window: timedelta) -> bool:
        key = (instance_id, repo)
        async with self._pool.connection() as conn, conn.transaction():
            # The row is locked while it is decided, so two copies never both tell.
            cur = await conn.execute(
                "INSERT INTO not_woken_told VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING"
                " RETURNING 1", (*key, at, entry_id))
            if await cur.fetchone():
                return True
            cur = await conn.execute(
                "SELECT told_at, entry_id FROM not_woken_told WHERE instance_id = %s"
                " AND repo = %s FOR UPDATE", key)
            told_at, told_entry = await cur.fetchone()
            if not tells_not_woken((told_at, told_entry), at, entry_id, window):
                return False
            await conn.execute(
                "UPDATE not_woken_told SET told_at = %s, entry_id = %s"
                " WHERE instance_id = %s AND repo = %s", (at, entry_id, *key))
        return True
