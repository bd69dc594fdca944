"""The timeline projection: one row per stored entry, keyed by its stream seq.

The timeline-writer is its only writer. Other services read it (the resolver for
a repo's newest seq, the composer for a brief). ``repo_ordinal`` is the entry's
position within its repo (1, 2, ...), so "how many repo entries up to seq N" is
one index lookup instead of a count over a large repo.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import psycopg

PROJECTION = "timeline"

DDL = """
CREATE TABLE IF NOT EXISTS timeline_entries (
    seq bigint PRIMARY KEY,
    entry_id text NOT NULL UNIQUE,
    instance_id text NOT NULL,
    repo text NOT NULL,
    session_id text NOT NULL,
    kind text NOT NULL,
    content text NOT NULL,
    at text NOT NULL,
    engine text,
    truncated_from integer,
    repo_ordinal bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS timeline_entries_repo ON timeline_entries (instance_id, repo, seq);
CREATE INDEX IF NOT EXISTS timeline_entries_session
    ON timeline_entries (instance_id, repo, session_id, seq);
CREATE INDEX IF NOT EXISTS timeline_entries_kind
    ON timeline_entries (instance_id, repo, kind, seq);
"""

COLUMNS = (
    "seq", "entry_id", "instance_id", "repo", "session_id", "kind", "content", "at",
    "engine", "truncated_from", "repo_ordinal",
)
ROW_COLUMNS = "seq, entry_id, session_id, kind, content, at, engine, truncated_from"


@dataclass(frozen=True)
class RepoHead:
    seq: int
    entries: int


# Seqs are JetStream sequences (uint64); this is past any real one.
NO_UPPER_SEQ = 2**63 - 1

REPO_HEAD_SQL = (
    "SELECT seq, repo_ordinal FROM timeline_entries WHERE instance_id = %s AND repo = %s"
    " AND seq < %s ORDER BY seq DESC LIMIT 1"
)


async def repo_head(
    conn: psycopg.AsyncConnection, instance_id: str, repo: str, before_seq: int | None = None
) -> RepoHead | None:
    """The newest repo entry (below before_seq when given) and how many precede it, inclusive."""
    upper = NO_UPPER_SEQ if before_seq is None else before_seq
    cur = await conn.execute(REPO_HEAD_SQL, (instance_id, repo, upper))
    row = await cur.fetchone()
    return RepoHead(int(row[0]), int(row[1])) if row else None


async def digest(conn: psycopg.AsyncConnection) -> tuple[str, int]:
    """sha256 over every row in seq order, and the row count: equal digests, equal projections."""
    h = hashlib.sha256()
    count = 0
    async with conn.cursor() as cur:
        async with cur.copy(
            f"COPY (SELECT {', '.join(COLUMNS)} FROM timeline_entries ORDER BY seq) TO STDOUT"
        ) as copy:
            async for chunk in copy:
                h.update(chunk)
                count += bytes(chunk).count(b"\n")
    return h.hexdigest(), count
