"""The briefs offered to each conversation: the latest one is served byte for byte.

A port, its Postgres adapter (the composer's own table) and a fake; both pass
tests/test_brief_store_contract.py.
"""

from __future__ import annotations

from typing import Protocol

from psycopg_pool import AsyncConnectionPool

from seedline_contracts.sessions import BriefGetReply
from seedline_core.brief import Brief
from seedline_platform import pg

DDL = """
CREATE TABLE IF NOT EXISTS briefs (
    session_id text PRIMARY KEY,
    decided_seq bigint NOT NULL,
    text text NOT NULL,
    rows integer NOT NULL,
    chars integer NOT NULL,
    omitted_rows integer NOT NULL,
    until_seq bigint NOT NULL,
    sha256 text NOT NULL
);
"""


class BriefStore(Protocol):
    async def save(self, session_id: str, decided_seq: int, brief: Brief) -> None:
        """Keep the brief of the newest decision; a replayed older one changes nothing."""
        ...

    async def keep(self, session_id: str, decided_seq: int, reply: BriefGetReply) -> None:
        """Keep a brief already recorded (its receipt and text), as `save` keeps a new one."""
        ...

    async def latest(self, session_id: str) -> BriefGetReply | None: ...


def _reply(brief: Brief) -> BriefGetReply:
    return BriefGetReply(brief.text, brief.rows, brief.chars, brief.omitted_rows,
                         brief.until_seq, brief.sha256)


class InMemoryBriefStore:
    def __init__(self) -> None:
        self._briefs: dict[str, tuple[int, BriefGetReply]] = {}

    async def save(self, session_id: str, decided_seq: int, brief: Brief) -> None:
        await self.keep(session_id, decided_seq, _reply(brief))

    async def keep(self, session_id: str, decided_seq: int, reply: BriefGetReply) -> None:
        kept = self._briefs.get(session_id)
        if kept is None or kept[0] <= decided_seq:
            self._briefs[session_id] = (decided_seq, reply)

    async def latest(self, session_id: str) -> BriefGetReply | None:
        kept = self._briefs.get(session_id)
        return kept[1] if kept else None


class PostgresBriefStore:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def setup(self) -> None:
        await pg.apply_schema(self._pool, "seed-composer", DDL)

    async def save(self, session_id: str, decided_seq: int, brief: Brief) -> None:
        await self.keep(session_id, decided_seq, _reply(brief))

    async def keep(self, session_id: str, decided_seq: int, reply: BriefGetReply) -> None:
        async with self._pool.connection() as conn:
            await conn.execute(
                "INSERT INTO briefs VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (session_id) DO UPDATE SET decided_seq = EXCLUDED.decided_seq,"
                " text = EXCLUDED.text, rows = EXCLUDED.rows, chars = EXCLUDED.chars,"
                " omitted_rows = EXCLUDED.omitted_rows, until_seq = EXCLUDED.until_seq,"
                " sha256 = EXCLUDED.sha256 WHERE briefs.decided_seq <= EXCLUDED.decided_seq",
                (session_id, decided_seq, reply.text, reply.rows, reply.chars,
                 reply.omitted_rows, reply.until_seq, reply.sha256),
            )

    async def latest(self, session_id: str) -> BriefGetReply | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT text, rows, chars, omitted_rows, until_seq, sha256 FROM briefs"
                " WHERE session_id = %s",
                (session_id,),
            )
            row = await cur.fetchone()
        return BriefGetReply(*row) if row else None
