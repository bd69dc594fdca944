"""Postgres plumbing: a pool, schema set-up under a lock, applied-sequence offsets.

Driver errors that mean "the database is away" become DatabaseUnavailable (an Outage)
as they leave a pool connection (OutagePool), so no handler classifies psycopg's errors: it
sees an outage (wait and retry) or a fault.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator, Callable, Collection
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Protocol, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from .bounded import trim_oldest
from .logging import get_logger
from .outage import DatabaseUnavailable

log = get_logger(__name__)

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    psycopg.OperationalError,
    psycopg.errors.AdminShutdown,
    psycopg.errors.CannotConnectNow,
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
)


class SchemaNotReady(RuntimeError):
    """Tables are missing and this role may not create them."""


class OutagePool(AsyncConnectionPool):
    """A pool whose connections raise DatabaseUnavailable where psycopg says the database is
    away (or no connection could be had in time); every other error passes unchanged."""

    @asynccontextmanager
    async def connection(self, timeout: float | None = None) -> AsyncIterator:
        try:
            async with super().connection(timeout) as conn:
                yield conn
        except (*TRANSIENT_ERRORS, PoolTimeout) as exc:
            raise DatabaseUnavailable(str(exc) or type(exc).__name__) from exc


class _Lent:
    """A connection a task holds in a transaction, lent to that task's reads (`reading`)."""

    def __init__(self, pool: AsyncConnectionPool, conn: psycopg.AsyncConnection) -> None:
        self.pool = pool
        self.conn: psycopg.AsyncConnection | None = conn


_LENT: ContextVar[_Lent | None] = ContextVar("seedline_pg_lent", default=None)


@asynccontextmanager
async def lending(pool: AsyncConnectionPool, conn: psycopg.AsyncConnection) -> AsyncIterator[None]:
    """While the block runs, this task's reads from `pool` (`reading`) go over `conn`, a
    connection the task holds in a transaction anyway (a launch's repo turn): under READ
    COMMITTED each statement sees what is committed as it runs, as it would alone, and the
    reads are part of that transaction instead of one transaction each. A task the block
    started that outlives it reads from the pool again."""
    lent = _Lent(pool, conn)
    token = _LENT.set(lent)
    try:
        yield
    finally:
        lent.conn = None
        _LENT.reset(token)


@asynccontextmanager
async def reading(pool: AsyncConnectionPool) -> AsyncIterator[psycopg.AsyncConnection]:
    """A connection for reads: the one lent to this task (`lending`), else one of the pool.
    Writes take theirs from the pool: a lender's rollback must not take them with it."""
    lent = _LENT.get()
    if lent is None or lent.conn is None or lent.pool is not pool:
        async with pool.connection() as conn:
            yield conn
        return
    try:
        yield lent.conn
    except TRANSIENT_ERRORS as exc:  # as OutagePool says them
        raise DatabaseUnavailable(str(exc) or type(exc).__name__) from exc


# Every query is planned with its real values. psycopg prepares a statement
# after a few runs, and Postgres may then settle on a generic plan: for "the
# newest entry of this repo" that plan walks the primary key backwards past
# every newer entry of other repos, so a quiet repo beside a busy one took
# ~600 ms instead of ~0.02 ms. Planning these small queries costs far less.
CONNECTION_OPTIONS = "-c plan_cache_mode=force_custom_plan"
# A pool for statements that find and write rows by key alone (a projection's offset row,
# conversations by id: the folds' statements), whose best plan never depends on the values:
# once psycopg prepares one, Postgres may keep a plan for it (plan_cache_mode auto). Planning
# the gateway's fold write each time was about 40 % of its round trip (450 against 265 µs).
KEYED_OPTIONS = "-c plan_cache_mode=auto"
# A server that takes the TCP connection and answers nothing (seen at a container stack's
# start) would hold a connection attempt for ever: the attempt fails instead.
CONNECT_TIMEOUT_SECONDS = 5


async def open_pool(url: str, name: str, max_size: int = 8,
                    keyed: bool = False) -> AsyncConnectionPool:
    """`keyed`: for statements that find rows by key alone (KEYED_OPTIONS)."""
    pool = OutagePool(
        url,
        min_size=1,
        max_size=max_size,
        open=False,
        timeout=5.0,
        kwargs={"application_name": name, "autocommit": True,
                "options": KEYED_OPTIONS if keyed else CONNECTION_OPTIONS,
                "connect_timeout": CONNECT_TIMEOUT_SECONDS},
        # Two quick attempts, then none until a caller asks for a connection: each request
        # that finds the pool empty makes it try again, so Postgres may be away for a while.
        reconnect_timeout=0,
    )
    await pool.open(wait=False)
    return pool


async def answers(pool: AsyncConnectionPool) -> bool:
    """Whether Postgres answers a trivial query within a second (for /readyz)."""
    try:
        async with pool.connection(timeout=1.0) as conn:
            await conn.execute("SELECT 1")
        return True
    except Exception:
        return False


def columns(rows: list[tuple], width: int) -> list[list]:
    """Rows as the column arrays an `unnest(%s::type[], ...)` takes: one statement for a
    batch of rows (`width` empty arrays for no row)."""
    return [list(column) for column in zip(*rows)] if rows else [[] for _ in range(width)]


def _lock_key(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


_TABLE = re.compile(r"CREATE\s+TABLE\s+IF\s+NOT\s+EXISTS\s+(\w+)", re.IGNORECASE)
_INDEX = re.compile(r"CREATE\s+(?:UNIQUE\s+)?INDEX\s+IF\s+NOT\s+EXISTS\s+(\w+)", re.IGNORECASE)


def objects_in(ddl: str) -> list[str]:
    """Names of the tables and indexes an idempotent DDL script creates."""
    return _TABLE.findall(ddl) + _INDEX.findall(ddl)


async def missing_objects(conn: psycopg.AsyncConnection, ddl: str) -> list[str]:
    missing = []
    for name in objects_in(ddl):
        cur = await conn.execute("SELECT to_regclass(%s)", (name,))
        if (await cur.fetchone())[0] is None:
            missing.append(name)
    return missing


async def apply_schema(pool: AsyncConnectionPool, name: str, ddl: str) -> None:
    """Create the service's tables, or check they exist when this role may not.

    Under the least-privilege roles of deploy/postgres-roles.sql the schema is
    made once by its owner; Postgres refuses CREATE ... IF NOT EXISTS to a role
    without CREATE even when the table is there, so those roles only verify.

    Under a lock: CREATE TABLE IF NOT EXISTS is not safe when two connections run it
    at once (both may try to create the row type), as two copies of a service do.
    """
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT has_schema_privilege(current_schema(), 'CREATE')")
        if not (await cur.fetchone())[0]:
            missing = await missing_objects(conn, ddl)
            if missing:
                raise SchemaNotReady(
                    f"{name}: {', '.join(missing)} missing, and this database role may not create "
                    "them; run deploy/postgres-roles.sql as the database owner first"
                )
            return
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key("seedline:schema"),))
            await conn.execute(ddl)


class BatchFold(Protocol):
    """A batch folded onto the rows it read (Offsets.fold_unlocked)."""

    @property
    def changes(self) -> bool: ...

    @property
    def columns(self) -> tuple: ...

    @property
    def rows_after(self) -> dict[str, tuple]:
        """Every row the batch read, as it left them, as `select` reads them, by key (for a
        fold given KeptRows)."""
        ...


F = TypeVar("F", bound=BatchFold)


class KeptRows:
    """The rows a fold last read or wrote, kept by this copy with the version of the offset's
    row they are current at (the transaction that last wrote it; see `Offsets.unmoved_since`):
    a batch touching only kept rows is folded from them with no read, and its write, checked
    against that version, goes through only where no other transaction wrote the offset's row
    since (another copy's batch, a rebuild, an erasure). Every statement of this copy that
    moves the offset says the version it found and the one it left (`wrote`): the rows stay
    kept only along an unbroken line of this copy's own writes."""

    # After what was kept proved stale, this many batches are read before any is folded from
    # it again: where copies fold in turn, what one keeps is most often stale, and a batch
    # folded from it costs a statement that changes nothing.
    READ_AFTER_MISS = 16

    def __init__(self, limit: int = 10_000) -> None:
        self._limit = limit
        self._version: str | None = None
        self._applied = 0
        self._rows: dict[str, tuple] = {}  # oldest first
        self._reading = 0  # batches still to read after a miss

    def found(self, keys: Collection[str]) -> tuple[int, str, list[tuple]] | None:
        """(applied, version, the rows of `keys`) as kept; None unless every one is."""
        if self._reading:
            self._reading -= 1
            return None
        if self._version is None or not keys or any(key not in self._rows for key in keys):
            return None
        return self._applied, self._version, [self._rows[key] for key in keys]

    def missed(self) -> None:
        """A statement folded from what was kept found the offset's row written since."""
        self.let_go()
        self._reading = self.READ_AFTER_MISS

    def wrote(self, was: str | None, now: str | None, applied: int,
              rows: dict[str, tuple] | None = None) -> None:
        """A statement of this copy moved the offset's row from version `was` to `now` (to
        `applied`), and left `rows` as they are now: what was kept at another version
        than `was` is let go."""
        if was is None or was != self._version:
            self._rows.clear()
            self._applied = applied
        else:
            self._applied = max(self._applied, applied)
        self._version = now
        for key, row in (rows or {}).items():
            self._rows.pop(key, None)
            self._rows[key] = row
        trim_oldest(self._rows, self._limit)

    def let_go(self) -> None:
        self._version = None
        self._rows.clear()


class Offsets:
    """The applied stream sequence of each projection a service keeps, in a table it owns.

    A projection stores its offset in the same transaction as the rows it changes
    (DESIGN.md rule 2), so a redelivered batch is a no-op.
    """

    def __init__(self, table: str) -> None:
        if not re.fullmatch(r"[a-z_]+_offsets", table):
            raise ValueError(f"{table!r} is not an offsets table name")
        self.table = table

    @property
    def ddl(self) -> str:
        return (
            f"CREATE TABLE IF NOT EXISTS {self.table} (\n"
            "    projection text PRIMARY KEY,\n"
            "    applied_seq bigint NOT NULL DEFAULT 0\n);\n"
        )

    async def lock(self, conn: psycopg.AsyncConnection, projection: str) -> int:
        """The projection's applied sequence, locked until the transaction ends, unmoved (a
        rebuild's, a reset's)."""
        return await self.take(conn, projection, 0)

    async def take(self, conn: psycopg.AsyncConnection, projection: str, upto: int) -> int:
        """Lock the projection's offset until the transaction ends, move it to at least
        `upto`, and return where it was: a lock and a move in one round trip. The batch then
        applies only what lies past the returned seq; rolled back, nothing moved.

        The CTE's FOR UPDATE waits for a copy folding at the same moment and then reads the
        offset that copy committed, so two copies never apply the same step."""
        take = (f"WITH was AS (SELECT applied_seq FROM {self.table} WHERE projection = %s"
                " FOR UPDATE)"
                f" UPDATE {self.table} AS o SET applied_seq = GREATEST(o.applied_seq, %s)"
                " FROM was WHERE o.projection = %s RETURNING was.applied_seq")
        row = await (await conn.execute(take, (projection, upto, projection))).fetchone()
        if row is None:  # a projection's first batch: its row is made once
            await conn.execute(
                f"INSERT INTO {self.table} (projection, applied_seq) VALUES (%s, 0)"
                " ON CONFLICT (projection) DO NOTHING",
                (projection,),
            )
            row = await (await conn.execute(take, (projection, upto, projection))).fetchone()
        return int(row[0])

    async def take_reading(self, conn: psycopg.AsyncConnection, projection: str, upto: int,
                           select: str, params: tuple) -> tuple[int, list[tuple]]:
        """`take`, and the rows `select` reads after it, most often in one round trip: where
        the offset was, and the rows. `select` holds `{gate}` where a condition joins its
        WHERE clause (its FOR UPDATE, if any, after it); its first column is never NULL.

        A statement reads every row with the snapshot it began with, also when it then
        waited for the offset's lock: rows another copy's batch (or a rebuild) committed
        meanwhile would be missing. Every such transaction writes the offset's row, so the
        statement compares the row's version as its snapshot holds it
        (`_version_in_snapshot`) with the version it locked; when they differ, the rows are
        read again, in a statement of its own that begins under the lock. The gate (an
        InitPlan run before the rows are scanned) takes the offset's lock before any row
        lock, in the order every batch takes them."""
        taken = (f"WITH was AS (SELECT applied_seq, xmin AS version FROM {self.table}"
                 " WHERE projection = %s FOR UPDATE),"
                 f" moved AS (UPDATE {self.table} AS o SET applied_seq ="
                 " GREATEST(o.applied_seq, %s) FROM was WHERE o.projection = %s"
                 " RETURNING was.applied_seq, was.version)"
                 " SELECT (SELECT applied_seq FROM moved),"
                 f" (SELECT version FROM moved) = ({self._version_in_snapshot}), r.*"
                 " FROM (SELECT 1) AS one LEFT JOIN ("
                 + select.format(gate=" AND EXISTS (SELECT 1 FROM moved)") + ") AS r ON true")
        cur = await conn.execute(taken, (projection, upto, projection, projection, *params))
        found = await cur.fetchall()
        locked, seen = found[0][:2]
        if locked is None:  # the projection's first batch: its row is made, then taken
            applied = await self.take(conn, projection, upto)
        elif seen:
            return int(locked), [row[2:] for row in found if row[2] is not None]
        else:
            applied = int(locked)
        cur = await conn.execute(select.format(gate=""), params)
        return applied, await cur.fetchall()

    @property
    def _version_in_snapshot(self) -> str:
        """The offset row's version (xmin: the transaction that last wrote it) as the
        statement's snapshot holds it; one parameter, the projection."""
        return f"SELECT xmin FROM {self.table} WHERE projection = %s"

    def moved_past(self, in_view: bool = False) -> str:
        """A WITH clause whose `moved` holds a row when the projection's offset lay below a
        batch's first seq and was moved to its last: a statement that follows it and
        changes rows only `WHERE EXISTS (SELECT 1 FROM moved)` applies a batch none of which
        was applied, in one round trip and no transaction around it (an autocommitted
        statement is one). It changes nothing when part of the batch was applied, or the
        projection has no offset row yet: the caller then takes the offset (`take`).
        The statement may wait for the offset's lock (another copy's batch) and then reads
        every other row with the snapshot it began with: what it decides from other rows
        must be checked on the row as it is, in the upsert's own WHERE (ON CONFLICT ... DO
        UPDATE ... WHERE), not by a NOT EXISTS beside it.
        Parameters: projection, last seq, projection, first seq.

        With `in_view`, it also changes nothing when another copy's batch or a rebuild
        committed after the statement began (the offset's row as locked is not the version
        its snapshot holds; see `take_reading`): what the statement reads of other rows is
        then as new as the offset. One more parameter: projection."""
        in_snapshot = f" AND was.version = ({self._version_in_snapshot})" if in_view else ""
        return (f"WITH was AS (SELECT applied_seq, xmin AS version FROM {self.table}"
                " WHERE projection = %s FOR UPDATE),"
                f" moved AS (UPDATE {self.table} AS o SET applied_seq = GREATEST(o.applied_seq, %s)"
                f" FROM was WHERE o.projection = %s AND was.applied_seq < %s{in_snapshot}"
                " RETURNING 1) ")

    async def read_with_rows(self, conn: psycopg.AsyncConnection, projection: str,
                             select: str, params: tuple) -> tuple[int, str, list[tuple]] | None:
        """Where the projection's offset stands, the version of its row (see `unmoved_since`)
        and the rows `select` reads, in one statement that takes no lock; None when the
        projection has no offset row yet. `select`'s first column is never NULL."""
        cur = await conn.execute(
            f"SELECT o.applied_seq, o.xmin::text, r.* FROM {self.table} AS o"
            f" LEFT JOIN ({select}) AS r ON true WHERE o.projection = %s",
            (*params, projection))
        found = await cur.fetchall()
        if not found:
            return None
        return int(found[0][0]), found[0][1], [row[2:] for row in found if row[2] is not None]

    def unmoved_since(self) -> str:
        """A WITH clause whose `moved` holds a row when the projection's offset row is still
        the version a read found (`read_with_rows`) and was moved to a batch's last seq: a
        statement that follows it and changes rows only `WHERE EXISTS (SELECT 1 FROM
        moved)` writes what a batch folded from that read, autocommitted, with no lock held
        while the batch was folded. Every transaction that changes what such a fold reads
        writes the offset's row too (a batch, a rebuild, an erasure), so an unchanged
        version says the rows read are as they were; when it changed, the statement changes
        nothing and the caller folds the batch under the lock (`take_reading`). Parameters:
        projection, last seq, projection, version."""
        return (f"WITH was AS (SELECT applied_seq, xmin AS version FROM {self.table}"
                " WHERE projection = %s FOR UPDATE),"
                f" moved AS (UPDATE {self.table} AS o SET applied_seq = GREATEST(o.applied_seq, %s)"
                " FROM was WHERE o.projection = %s AND was.version::text = %s RETURNING 1) ")

    async def fold_unlocked(self, conn: psycopg.AsyncConnection, projection: str,
                            last_seq: int, select: str, params: tuple,
                            fold: Callable[[int, list[tuple]], F], write: str,
                            kept: KeptRows | None = None,
                            keys: Collection[str] = ()) -> F | None:
        """A batch ending at `last_seq` folded from the rows `select` reads with no lock
        (`read_with_rows`) and written by `write`, a statement that begins with
        `unmoved_since` and selects whether `moved` and the version it left
        (`version_left`). `fold(applied, rows)` is the batch folded past the offset:
        `changes` says whether it has anything to write, `columns` are the write's
        parameters after the clause's. Returns the fold once written, or with nothing to
        write (the offset then moved past the batch); None when the projection has no offset
        row yet or another transaction wrote it since the read: the caller folds the batch
        under the lock (`take_reading`).
        With `kept`, the rows of `keys` are taken from it where it holds them all, with no
        read (and the offset is moved past a batch that changes nothing only where its row
        is as kept), and what the batch leaves is kept."""
        if kept is not None and (read := kept.found(keys)) is not None:
            applied, version, found = read
            folded = fold(applied, found)
            if not folded.changes and last_seq <= applied:
                return folded  # delivered again: nothing to write or move
            moved, now = await self._written_unmoved(conn, projection, last_seq, version,
                                                     folded, write)
            if moved:
                kept.wrote(version, now, max(applied, last_seq), folded.rows_after)
                return folded
            kept.missed()  # nothing was written: read and folded as any other
        read = await self.read_with_rows(conn, projection, select, params)
        if read is None:
            return None
        applied, version, found = read
        folded = fold(applied, found)
        if not folded.changes:
            if last_seq > applied:
                was, now = await self.advance(conn, projection, last_seq)
                if kept is not None:
                    kept.wrote(was, now, last_seq, folded.rows_after if was == version else None)
            return folded
        moved, now = await self._written_unmoved(conn, projection, last_seq, version, folded,
                                                 write)
        if kept is not None:
            if moved:
                kept.wrote(version, now, max(applied, last_seq), folded.rows_after)
            else:
                kept.let_go()
        return folded if moved else None

    async def _written_unmoved(self, conn: psycopg.AsyncConnection, projection: str,
                               last_seq: int, version: str, folded: BatchFold,
                               write: str) -> tuple[bool, str | None]:
        """`folded` written by `write`, or only the offset moved when it changes nothing,
        where the offset's row is still at `version`: (whether, the version left)."""
        if folded.changes:
            statement, columns = write, folded.columns
        else:
            statement = (self.unmoved_since()
                         + f"SELECT EXISTS (SELECT 1 FROM moved), {self.version_left}")
            columns = ()
        cur = await conn.execute(statement, (projection, last_seq, projection, version,
                                             *columns))
        moved, now = await cur.fetchone()
        return moved, now

    # Selected after `unmoved_since` or `moved_past`: the version of the offset's row the
    # statement left when it moved it (its own transaction's id, as the row's xmin reads).
    version_left = "(SELECT pg_current_xact_id()::xid::text FROM moved)"

    def touch_statement(self, projection: str) -> str:
        """A statement that writes the offset's row without moving it, for a transaction
        that changes rows a fold reads without a lock (an erasure): a fold that read before
        it commits then writes nothing (`unmoved_since`). Lock it first, as a batch does."""
        if not re.fullmatch(r"[a-z_.0-9]+", projection):
            raise ValueError(f"{projection!r} is not a projection name")
        return (f"UPDATE {self.table} SET applied_seq = applied_seq"
                f" WHERE projection = '{projection}'")

    async def advance(self, conn: psycopg.AsyncConnection, projection: str,
                      seq: int) -> tuple[str | None, str | None]:
        """Move the offset past a batch that changes no row, in one statement of its own
        (the pool's connections commit each statement): most of an open's events are
        such for a given projection, and a transaction would cost three more round trips.
        Returns the version of the offset's row it found and the one it left (KeptRows.wrote;
        both None where it made the row, a projection's first batch)."""
        # `was` is joined, not only returned: a CTE read only by RETURNING is read after the
        # row is written, and a row this statement wrote is not locked by it.
        cur = await conn.execute(
            f"WITH was AS (SELECT xmin::text AS version FROM {self.table}"
            " WHERE projection = %s FOR UPDATE)"
            f" UPDATE {self.table} AS o SET applied_seq = GREATEST(o.applied_seq, %s)"
            " FROM was WHERE o.projection = %s"
            " RETURNING was.version, pg_current_xact_id()::xid::text",
            (projection, seq, projection),
        )
        moved = await cur.fetchone()
        if moved is not None:
            return moved[0], moved[1]
        await conn.execute(
            f"INSERT INTO {self.table} AS o (projection, applied_seq) VALUES (%s, %s)"
            " ON CONFLICT (projection) DO UPDATE"
            " SET applied_seq = GREATEST(o.applied_seq, EXCLUDED.applied_seq)",
            (projection, seq),
        )
        return None, None

    async def read(self, conn: psycopg.AsyncConnection, projection: str) -> int:
        cur = await conn.execute(
            f"SELECT applied_seq FROM {self.table} WHERE projection = %s", (projection,)
        )
        row = await cur.fetchone()
        return int(row[0]) if row else 0
