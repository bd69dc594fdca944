"""Every open the platform decided, as it was decided then: the console's projection.

Built from SEEDLINE_SESSIONS by a batch consumer typed at the edge, as every projection
is (seedline_platform.consumer); the applied stream sequence is stored in the same
transaction as the rows (DESIGN.md rule 2), so a redelivery changes nothing, and the
consumer takes that stored offset as the truth: rows and offset reset (or a new
PROJECTION name) refill from the stream. What it cannot read it logs: the web may not
publish to SEEDLINE_REJECTED (least privilege), and the services that fold the same events
park it there. What an event does to a conversation's opens is the one fold of
``seedline_platform.lifecycle_events.fold_opens`` (a decision joined with its answer,
a `resume_lost` correcting it): this module only loads, folds and stores.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from psycopg_pool import AsyncConnectionPool

from seedline_contracts import subjects
from seedline_contracts.codec import encode
from seedline_contracts.events import SessionEvent
from seedline_platform.app_base import in_route
from seedline_contracts.sessions import OpenReply
from seedline_platform import pg
from seedline_platform.consumer import Batch, BatchConsumer, Consumption
from seedline_platform.erasure import Forgotten
from seedline_platform.lifecycle_events import OpenView, fold_opens
from seedline_platform.logging import get_logger
from seedline_platform.replay import last_seq
from seedline_platform.routing import Route
from seedline_platform.watermark import Watermark

log = get_logger(__name__)

PROJECTION = "seedline-web-opens-2"  # also its durable consumer's name
BATCH = 256

OFFSETS = pg.Offsets("web_offsets")

# A table of its own, replayed from the stream's start under a new offset name: the
# rows of before (web_open_decisions, web_opens) had no place for a corrected reply.
DDL = OFFSETS.ddl + """
CREATE TABLE IF NOT EXISTS web_open_views (
    session_id text NOT NULL,
    decided_seq bigint NOT NULL,
    instance_id text NOT NULL,
    repo text NOT NULL,
    view text NOT NULL,
    answered_seq bigint,
    PRIMARY KEY (session_id, decided_seq)
);
CREATE INDEX IF NOT EXISTS web_open_views_by_repo
    ON web_open_views (instance_id, repo, answered_seq) WHERE answered_seq IS NOT NULL;
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
    ended: bool = False  # stopped, or opened again, since


@dataclass(frozen=True)
class RepoOpen:
    """A repo's newest open: the overview's machine and time of each repo."""

    session_id: str
    node_id: str
    engine: str
    at: str


_views = msgspec.json.Decoder(OpenView)


class OpensProjection:
    def __init__(self, js: JetStreamContext, pool: AsyncConnectionPool, route: Route,
                 forgotten: Forgotten | None = None) -> None:
        self._js = js
        self._pool = pool
        # The erasures the web has taken in: no open of a wake by a forgotten message is
        # kept, although its events may come after the instance's rows were dropped.
        self.forgotten = forgotten or Forgotten()
        self._mark = Watermark(self.applied)
        # Consumed as its row of the web's routing table says.
        self.consumer = BatchConsumer(
            js, Consumption(route.stream, route.durable, route.filters, batch_size=BATCH,
                            message=route.message, idempotent=route.idempotent),
            handle=in_route(route, self.apply), park=_logged, applied=self.applied)

    async def setup(self) -> None:
        await pg.apply_schema(self._pool, "seedline-web", DDL)

    async def applied(self) -> int:
        async with self._pool.connection() as conn:
            return await OFFSETS.read(conn, PROJECTION)

    async def run(self) -> None:
        await self.consumer.start()
        await self.consumer.run()

    async def apply(self, batch: Batch[SessionEvent]) -> None:
        self._mark.taking(batch.last_seq)
        async with self.forgotten.folding(), self._pool.connection() as conn, \
                conn.transaction():
            applied = await OFFSETS.take(conn, PROJECTION, batch.last_seq)
            for event, msg in batch.items:
                seq = msg.metadata.sequence.stream
                if seq > applied:
                    await self._apply_one(conn, seq, event)
        await self._mark.advance(batch.last_seq)

    async def _apply_one(self, conn, seq: int, event: SessionEvent) -> None:
        cur = await conn.execute(
            "SELECT view FROM web_open_views WHERE session_id = %s ORDER BY decided_seq",
            (event.session_id,),
        )
        before = tuple(_views.decode(row[0]) for row in await cur.fetchall())
        after = fold_opens(before, event, seq)
        for view in after:
            if view not in before and not self.forgotten.covers(view.instance_id,
                                                                 view.wake_seq):
                await conn.execute(
                    "INSERT INTO web_open_views VALUES (%s, %s, %s, %s, %s, %s)"
                    " ON CONFLICT (session_id, decided_seq) DO UPDATE SET view = EXCLUDED.view,"
                    " answered_seq = EXCLUDED.answered_seq",
                    (view.session_id, view.decided_seq, view.instance_id, view.repo,
                     encode(view).decode(), view.answered_seq),
                )

    async def catch_up(self, timeout: float = 2.0) -> bool:
        """Wait until everything already in the stream is applied (read your own opens)."""
        try:
            target = await last_seq(self._js, subjects.SESSIONS_STREAM)
        except Exception:
            return False
        return await self._mark.reached(target, timeout)

    async def for_repo(self, instance_id: str, repo: str, limit: int = 500) -> list[OpenRecord]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT view FROM ("
                "  SELECT view, answered_seq FROM web_open_views WHERE instance_id = %s"
                "  AND repo = %s AND answered_seq IS NOT NULL"
                "  ORDER BY answered_seq DESC LIMIT %s) newest ORDER BY answered_seq",
                (instance_id, repo, limit),
            )
            rows = await cur.fetchall()
        return [record_of(_views.decode(row[0])) for row in rows]

    async def repos(self, instance_id: str) -> dict[str, RepoOpen]:
        """Repos of the instance the platform opened conversations on, each with its newest
        answered open (where and when it ran)."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT DISTINCT ON (repo) repo, view FROM web_open_views"
                " WHERE instance_id = %s AND answered_seq IS NOT NULL"
                " ORDER BY repo, answered_seq DESC",
                (instance_id,),
            )
            rows = await cur.fetchall()
        found = {}
        for repo, text in rows:
            view = _views.decode(text)
            found[repo] = RepoOpen(view.session_id, view.node_id, view.engine,
                                   view.answered_at or view.at)
        return found


def record_of(view: OpenView) -> OpenRecord:
    error = view.error
    return OpenRecord(view.answered_seq or view.decided_seq, view.session_id, view.repo,
                      view.node_id, view.engine, view.answered_at or view.at,
                      view.relocation_from, view.until_seq, view.reply,
                      error.code if error else None, error.message if error else None,
                      view.brief_text, view.ended)


async def _logged(msg: Msg, reason: str) -> None:
    """What the projection cannot apply: said in the log, with its place in the stream."""
    log.warning("session_event_not_applied", seq=msg.metadata.sequence.stream, reason=reason)
