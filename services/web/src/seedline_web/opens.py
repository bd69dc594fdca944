"""Every open the platform decided, as it was decided then: the console's projection.

Built from SEEDLINE_SESSIONS with an ephemeral consumer that keeps nothing on the
server; the applied stream sequence is stored in the same transaction as the
rows (DESIGN.md rule 2), so a restart resumes where it stopped and a redelivery
changes nothing. An open is a decision (`continuity_decided`, with the brief's text from
`seed_composed`) joined with its answer: `opened`, `relocated` or `open_failed`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Sequence

import msgspec
from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js import api as js_api
from psycopg_pool import AsyncConnectionPool

from seedline_contracts import subjects
from seedline_contracts.codec import decode, encode
from seedline_contracts.events import (
    ContinuityDecided,
    Opened,
    OpenFailed,
    Relocated,
    SeedComposed,
)
from seedline_contracts.sessions import OpenReply
from seedline_platform import pg
from seedline_platform.logging import get_logger
from seedline_platform.replay import last_seq
from seedline_platform.sealing import sealed_instance

log = get_logger(__name__)

PROJECTION = "seedline-web-opens"
BATCH = 256

OFFSETS = pg.Offsets("web_offsets")

DDL = OFFSETS.ddl + """
CREATE TABLE IF NOT EXISTS web_open_decisions (
    session_id text PRIMARY KEY,
    instance_id text NOT NULL,
    repo text NOT NULL,
    node_id text NOT NULL,
    engine text NOT NULL,
    relocation_from text,
    until_seq bigint,
    brief_text text,
    answered boolean NOT NULL DEFAULT false
);
CREATE TABLE IF NOT EXISTS web_opens (
    event_seq bigint PRIMARY KEY,
    session_id text NOT NULL,
    instance_id text NOT NULL,
    repo text NOT NULL,
    node_id text NOT NULL,
    engine text NOT NULL,
    at text NOT NULL,
    relocation_from text,
    until_seq bigint,
    reply text,
    error_code text,
    error_message text,
    brief_text text
);
CREATE INDEX IF NOT EXISTS web_opens_by_repo ON web_opens (instance_id, repo, event_seq);
"""


@dataclass(frozen=True)
class OpenRecord:
    """One open: `reply` when it succeeded, `error_*` when it failed."""

    event_seq: int
    session_id: str
    repo: str
    node_id: str
    engine: str
    at: str
    relocation_from: str | None
    until_seq: int | None
    reply: OpenReply | None
    error_code: str | None
    error_message: str | None
    brief_text: str | None


def _moved_from(plan) -> str | None:
    """The machine a relocation left; "" when it is a relocation from an unknown machine."""
    if plan.relocation_from:
        return plan.relocation_from
    return "" if getattr(plan, "relocation", False) else None


ANSWERS = {"opened": Opened, "relocated": Relocated, "open_failed": OpenFailed}


def _event_type(msg: Msg) -> str:
    return msg.subject.rsplit(".", 1)[-1]


class OpensProjection:
    def __init__(self, js: JetStreamContext, pool: AsyncConnectionPool) -> None:
        self._js = js
        self._pool = pool

    async def setup(self) -> None:
        await pg.apply_schema(self._pool, "seedline-web", DDL)

    async def applied(self) -> int:
        async with self._pool.connection() as conn:
            return await OFFSETS.read(conn, PROJECTION)

    async def run(self) -> None:
        """Follow the stream for ever; start again from the stored offset after any fault."""
        while True:
            try:
                await self._follow()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("opens_projection_paused", error=str(exc))
                await asyncio.sleep(1.0)

    async def _follow(self) -> None:
        config = js_api.ConsumerConfig(
            deliver_policy=js_api.DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=await self.applied() + 1,
            ack_policy=js_api.AckPolicy.NONE,
            inactive_threshold=60.0,
            mem_storage=True,
        )
        sub = await self._js.pull_subscribe(subjects.SESSION_EVENTS_ALL,
                                            stream=subjects.SESSIONS_STREAM, config=config)
        try:
            while True:
                try:
                    msgs = await sub.fetch(BATCH, timeout=5.0)
                except NatsTimeout:
                    continue
                await self.apply(msgs)
        finally:
            try:
                await sub.unsubscribe()
            except Exception:
                pass

    async def apply(self, msgs: Sequence[Msg]) -> None:
        async with self._pool.connection() as conn, conn.transaction():
            applied = await OFFSETS.lock(conn, PROJECTION)
            newest = applied
            for msg in msgs:
                seq = msg.metadata.sequence.stream
                if seq <= applied:
                    continue
                newest = max(newest, seq)
                try:
                    await self._apply_one(conn, seq, msg)
                except msgspec.MsgspecError:
                    log.warning("session_event_unreadable", seq=seq)
            await OFFSETS.set(conn, PROJECTION, newest)

    async def _apply_one(self, conn, seq: int, msg: Msg) -> None:
        """A decision is kept until its answer: `opened`, `relocated` carrying the reply
        (1.1), or `open_failed`; the first answer to a decision is its open."""
        kind = _event_type(msg)
        if kind == "continuity_decided":
            event = decode(msg.data, ContinuityDecided)
            plan = event.plan
            await conn.execute(
                "INSERT INTO web_open_decisions VALUES (%s, %s, %s, %s, %s, %s, %s, NULL, false)"
                " ON CONFLICT (session_id) DO UPDATE SET instance_id = EXCLUDED.instance_id,"
                " repo = EXCLUDED.repo, node_id = EXCLUDED.node_id, engine = EXCLUDED.engine,"
                " relocation_from = EXCLUDED.relocation_from, until_seq = EXCLUDED.until_seq,"
                " brief_text = NULL, answered = false",
                (event.session_id, plan.instance_id, plan.repo, plan.node_id, plan.engine,
                 _moved_from(plan), event.until_seq),
            )
        elif kind == "seed_composed":
            composed = decode(msg.data, SeedComposed)
            # Sealed text (1.2) is not copied here: the console asks the composer for it.
            text = None if sealed_instance(composed.text or "") else composed.text
            await conn.execute(
                "UPDATE web_open_decisions SET brief_text = %s WHERE session_id = %s",
                (text, composed.session_id),
            )
        elif kind in ANSWERS:
            event = decode(msg.data, ANSWERS[kind])
            reply = getattr(event, "reply", None)
            error = getattr(event, "error", None)
            if reply is None and error is None:
                return  # a relocated event of before 1.1: its opened event is the answer
            await conn.execute(
                "INSERT INTO web_opens SELECT %s, session_id, instance_id, repo, node_id, engine,"
                " %s, COALESCE(%s, relocation_from), until_seq, %s, %s, %s, brief_text"
                " FROM web_open_decisions WHERE session_id = %s AND NOT answered"
                " ON CONFLICT (event_seq) DO NOTHING",
                (seq, event.at, getattr(event, "from_node_id", None) or None,
                 encode(reply).decode() if reply else None,
                 error.code if error else None, error.message if error else None,
                 event.session_id),
            )
            await conn.execute(
                "UPDATE web_open_decisions SET answered = true WHERE session_id = %s",
                (event.session_id,),
            )

    async def catch_up(self, timeout: float = 2.0) -> bool:
        """Wait until everything already in the stream is applied (read your own opens)."""
        try:
            target = await last_seq(self._js, subjects.SESSIONS_STREAM)
        except Exception:
            return False
        return await OFFSETS.wait(self._pool, PROJECTION, target, timeout)

    async def for_repo(self, instance_id: str, repo: str, limit: int = 500) -> list[OpenRecord]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT event_seq, session_id, repo, node_id, engine, at, relocation_from,"
                " until_seq, reply, error_code, error_message, brief_text FROM ("
                "  SELECT * FROM web_opens WHERE instance_id = %s AND repo = %s"
                "  ORDER BY event_seq DESC LIMIT %s) newest ORDER BY event_seq",
                (instance_id, repo, limit),
            )
            rows = await cur.fetchall()
        return [_record(row) for row in rows]

    async def repos(self, instance_id: str) -> list[tuple[str, int]]:
        """Repos of the instance the platform opened conversations on, with how many opens."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT repo, count(*) FROM web_opens WHERE instance_id = %s"
                " GROUP BY repo ORDER BY repo",
                (instance_id,),
            )
            return [(r, int(n)) for r, n in await cur.fetchall()]


def _record(row: tuple) -> OpenRecord:
    (event_seq, session_id, repo, node_id, engine, at, relocation_from, until_seq, reply,
     error_code, error_message, brief_text) = row
    parsed = decode(reply.encode(), OpenReply) if reply else None
    return OpenRecord(int(event_seq), session_id, repo, node_id, engine, at, relocation_from,
                      until_seq, parsed, error_code, error_message, brief_text)

