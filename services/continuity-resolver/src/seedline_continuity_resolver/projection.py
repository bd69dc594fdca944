"""The conversation projection: per conversation, what the decision needs to know.

Built from both streams, each with its applied sequence stored in the same
transaction as the change (so a redelivered batch is a no-op):
- SEEDLINE_TIMELINE: last activity (latest entry `at`), the engine entries name,
  the highest timeline seq (tie-breaker between equally recent conversations);
- SEEDLINE_SESSIONS: successful opens (activity, engine, machine, resume key),
  engine_bound (resume key and the machine holding it), relocations, and the
  final reply of each open request (request_id idempotency).
"""

from __future__ import annotations

from typing import Sequence

import msgspec
from nats.aio.msg import Msg
from psycopg_pool import AsyncConnectionPool

from seedline_contracts.codec import decode, encode
from seedline_contracts.events import EngineBound, OpenFailed, Opened, Relocated, SessionEvent
from seedline_contracts.timeline import TimelineEntry
from seedline_platform import pg

TIMELINE_PROJECTION = "resolver.timeline"
SESSIONS_PROJECTION = "resolver.sessions"

DDL = """
CREATE TABLE IF NOT EXISTS conversations (
    session_id text PRIMARY KEY,
    instance_id text NOT NULL,
    repo text NOT NULL,
    last_activity timestamptz,
    activity_seq bigint NOT NULL DEFAULT 0,
    entry_engine text,
    open_engine text,
    node_id text,
    resume_key text,
    resume_node_id text
);
CREATE INDEX IF NOT EXISTS conversations_repo
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

_event_decoder = msgspec.json.Decoder(SessionEvent)

_UPSERT_ACTIVITY = """
INSERT INTO conversations (session_id, instance_id, repo, last_activity, activity_seq, entry_engine)
VALUES (%(session_id)s, %(instance_id)s, %(repo)s, %(at)s, %(seq)s, %(engine)s)
ON CONFLICT (session_id) DO UPDATE SET
    last_activity = GREATEST(conversations.last_activity, EXCLUDED.last_activity),
    activity_seq = GREATEST(conversations.activity_seq, EXCLUDED.activity_seq),
    entry_engine = COALESCE(EXCLUDED.entry_engine, conversations.entry_engine)
"""

_UPSERT_OPENED = """
INSERT INTO conversations (session_id, instance_id, repo, last_activity, open_engine, node_id,
                           resume_key, resume_node_id)
VALUES (%(session_id)s, %(instance_id)s, %(repo)s, %(at)s, %(engine)s, %(node_id)s,
        %(resume_key)s, %(resume_node)s)
ON CONFLICT (session_id) DO UPDATE SET
    last_activity = GREATEST(conversations.last_activity, EXCLUDED.last_activity),
    open_engine = EXCLUDED.open_engine,
    node_id = EXCLUDED.node_id,
    resume_key = COALESCE(EXCLUDED.resume_key, conversations.resume_key),
    resume_node_id = CASE WHEN EXCLUDED.resume_key IS NULL THEN conversations.resume_node_id
                          ELSE EXCLUDED.resume_node_id END
"""


class ConversationProjection:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def setup(self) -> None:
        await pg.apply_schema(self._pool, "continuity-resolver", DDL)

    async def apply_timeline(self, msgs: Sequence[Msg]) -> None:
        async with self._pool.connection() as conn, conn.transaction():
            applied = await pg.lock_offset(conn, TIMELINE_PROJECTION)
            fresh = [m for m in msgs if m.metadata.sequence.stream > applied]
            if not fresh:
                return
            params = []
            for msg in fresh:
                entry = decode(msg.data, TimelineEntry)
                params.append({
                    "session_id": entry.session_id, "instance_id": entry.instance_id,
                    "repo": entry.repo, "at": entry.at, "seq": msg.metadata.sequence.stream,
                    "engine": entry.engine,
                })
            async with conn.cursor() as cur:
                await cur.executemany(_UPSERT_ACTIVITY, params)
            await pg.set_offset(conn, TIMELINE_PROJECTION, fresh[-1].metadata.sequence.stream)

    async def apply_sessions(self, msgs: Sequence[Msg]) -> None:
        async with self._pool.connection() as conn, conn.transaction():
            applied = await pg.lock_offset(conn, SESSIONS_PROJECTION)
            fresh = [m for m in msgs if m.metadata.sequence.stream > applied]
            for msg in fresh:
                await self._apply_event(conn, _event_decoder.decode(msg.data))
            if fresh:
                await pg.set_offset(conn, SESSIONS_PROJECTION, fresh[-1].metadata.sequence.stream)

    async def _apply_event(self, conn, event) -> None:
        if isinstance(event, Opened):
            plan = event.plan
            await conn.execute(_UPSERT_OPENED, {
                "session_id": event.session_id, "instance_id": plan.instance_id, "repo": plan.repo,
                "at": event.at, "engine": plan.engine, "node_id": plan.node_id,
                "resume_key": event.engine_session_id, "resume_node": plan.node_id,
            })
            await self._store_reply(conn, plan.instance_id, plan.request_id, encode(event.reply))
        elif isinstance(event, OpenFailed):
            body = encode({"ok": False, "error": event.error})
            await self._store_reply(conn, event.plan.instance_id, event.plan.request_id, body)
        elif isinstance(event, EngineBound):
            await conn.execute(
                "UPDATE conversations SET resume_key = %s, resume_node_id = %s WHERE session_id = %s",
                (event.engine_session_id, event.node_id, event.session_id),
            )
        elif isinstance(event, Relocated):
            await conn.execute(
                "UPDATE conversations SET node_id = %s WHERE session_id = %s",
                (event.to_node_id, event.session_id),
            )

    @staticmethod
    async def _store_reply(conn, instance_id: str, request_id: str | None, reply: bytes) -> None:
        if request_id is None:
            return
        await conn.execute(
            "UPDATE open_requests SET reply = %s WHERE instance_id = %s AND request_id = %s"
            " AND reply IS NULL",
            (reply, instance_id, request_id),
        )
