"""The gateway's own tables: which conversations are live where, machine labels,
and each instance's most recent successful open (where a wake goes)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from psycopg_pool import AsyncConnectionPool

from seedline_platform import pg

DDL = """
CREATE TABLE IF NOT EXISTS live_conversations (
    session_id text PRIMARY KEY,
    instance_id text NOT NULL,
    repo text NOT NULL,
    node_id text NOT NULL,
    engine text NOT NULL,
    opened_at timestamptz NOT NULL,
    last_activity timestamptz NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS live_conversations_repo ON live_conversations (instance_id, repo);
CREATE TABLE IF NOT EXISTS machines (
    node_id text PRIMARY KEY,
    label text NOT NULL,
    last_seen timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS last_opens (
    instance_id text PRIMARY KEY,
    node_id text NOT NULL,
    engine text NOT NULL,
    at timestamptz NOT NULL
);
"""


@dataclass(frozen=True)
class Live:
    session_id: str
    instance_id: str
    repo: str
    node_id: str
    engine: str
    opened_at: datetime
    last_activity: datetime


_LIVE_COLUMNS = "session_id, instance_id, repo, node_id, engine, opened_at, last_activity"


class GatewayState:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def setup(self) -> None:
        await pg.apply_schema(self._pool, "runner-gateway", DDL)

    async def live_for_repo(self, instance_id: str, repo: str) -> Live | None:
        return await self._one(
            f"SELECT {_LIVE_COLUMNS} FROM live_conversations WHERE instance_id = %s AND repo = %s",
            (instance_id, repo),
        )

    async def live(self, session_id: str) -> Live | None:
        return await self._one(
            f"SELECT {_LIVE_COLUMNS} FROM live_conversations WHERE session_id = %s", (session_id,)
        )

    async def all_live(self, instance_id: str | None = None) -> list[Live]:
        async with self._pool.connection() as conn:
            if instance_id is None:
                cur = await conn.execute(f"SELECT {_LIVE_COLUMNS} FROM live_conversations ORDER BY opened_at")
            else:
                cur = await conn.execute(
                    f"SELECT {_LIVE_COLUMNS} FROM live_conversations WHERE instance_id = %s ORDER BY opened_at",
                    (instance_id,),
                )
            return [Live(*row) for row in await cur.fetchall()]

    async def _one(self, sql: str, params: tuple) -> Live | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(sql, params)
            row = await cur.fetchone()
        return Live(*row) if row else None

    async def mark_live(self, live: Live) -> None:
        """The conversation now runs on live.node_id; it replaces any other on its repo."""
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                "DELETE FROM live_conversations WHERE instance_id = %s AND repo = %s AND session_id <> %s",
                (live.instance_id, live.repo, live.session_id),
            )
            await conn.execute(
                f"INSERT INTO live_conversations ({_LIVE_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (session_id) DO UPDATE SET node_id = EXCLUDED.node_id,"
                " engine = EXCLUDED.engine, last_activity = EXCLUDED.last_activity",
                (live.session_id, live.instance_id, live.repo, live.node_id, live.engine,
                 live.opened_at, live.last_activity),
            )
            await conn.execute(
                "INSERT INTO last_opens VALUES (%s, %s, %s, %s) ON CONFLICT (instance_id) DO UPDATE"
                " SET node_id = EXCLUDED.node_id, engine = EXCLUDED.engine, at = EXCLUDED.at",
                (live.instance_id, live.node_id, live.engine, live.opened_at),
            )

    async def end(self, session_id: str) -> None:
        async with self._pool.connection() as conn:
            await conn.execute("DELETE FROM live_conversations WHERE session_id = %s", (session_id,))

    async def touch(self, activity: dict[str, datetime]) -> None:
        if not activity:
            return
        async with self._pool.connection() as conn:
            async with conn.cursor() as cur:
                await cur.executemany(
                    "UPDATE live_conversations SET last_activity = GREATEST(last_activity, %s)"
                    " WHERE session_id = %s",
                    [(at, sid) for sid, at in activity.items()],
                )

    async def idle_since(self, cutoff: datetime) -> list[Live]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                f"SELECT {_LIVE_COLUMNS} FROM live_conversations WHERE last_activity < %s", (cutoff,)
            )
            return [Live(*row) for row in await cur.fetchall()]

    async def last_open(self, instance_id: str) -> tuple[str, str] | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT node_id, engine FROM last_opens WHERE instance_id = %s", (instance_id,)
            )
            row = await cur.fetchone()
        return (row[0], row[1]) if row else None

    async def record_machine(self, node_id: str, label: str, seen: datetime) -> None:
        async with self._pool.connection() as conn:
            await conn.execute(
                "INSERT INTO machines VALUES (%s, %s, %s) ON CONFLICT (node_id) DO UPDATE"
                " SET label = EXCLUDED.label, last_seen = EXCLUDED.last_seen",
                (node_id, label, seen),
            )

    async def label(self, node_id: str) -> str | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute("SELECT label FROM machines WHERE node_id = %s", (node_id,))
            row = await cur.fetchone()
        return row[0] if row else None
