"""The Postgres reader against a real server: the kind filter, the count, and their index."""

from __future__ import annotations

import psycopg
import pytest

from seedline_platform import pg
from seedline_seed_composer.brief_of_decision import compose_for
from seedline_seed_composer.reader import ViewReader
from seedline_timeline_view import PostgresTimelineView
from seedline_timeline_writer.schema import DDL as TIMELINE_DDL


def PostgresTimelineReader(pool) -> ViewReader:  # noqa: N802 (reads like the adapter it is)
    return ViewReader(PostgresTimelineView(pool))

pytestmark = pytest.mark.servers

# A repo whose history is a long agent run: three instructions among 20,000 tool rows,
# beside another repo of the same instance.
FILL = """
INSERT INTO timeline_entries
SELECT g, 'e' || g, 'bd43f4de', 'apps/chess-academy', 'csess_old',
       CASE WHEN g IN (1, 9000, 19990) THEN 'chat_user'
            WHEN g % 2 = 0 THEN 'terminal' ELSE 'command' END,
       CASE WHEN g IN (1, 9000, 19990) THEN 'instruction ' || g ELSE repeat('x', 300) END,
       '2026-08-17T10:00:00Z', NULL, NULL, g
FROM generate_series(1, 20000) g;
INSERT INTO timeline_entries
SELECT g, 'e' || g, 'bd43f4de', 'apps/other', 'csess_x', 'chat_user', 'elsewhere ' || g,
       '2026-08-17T10:00:00Z', NULL, NULL, g - 20000
FROM generate_series(20001, 20100) g;
ANALYZE timeline_entries;
"""


@pytest.fixture
async def pool(database_url):
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(TIMELINE_DDL)
        conn.execute(FILL)
    pool = await pg.open_pool(database_url, "reader-test", max_size=2)
    try:
        yield pool
    finally:
        await pool.close()


async def test_the_kind_filter_reads_only_that_kind_of_this_repo_newest_first(pool) -> None:
    reader = PostgresTimelineReader(pool)
    rows = await reader.newest_first("bd43f4de", "apps/chess-academy", 19_999, 10, "chat_user")
    assert [(r.seq, r.kind, r.content) for r in rows] == [
        (19990, "chat_user", "instruction 19990"),
        (9000, "chat_user", "instruction 9000"),
        (1, "chat_user", "instruction 1"),
    ]
    below = await reader.newest_first("bd43f4de", "apps/chess-academy", 8_999, 10, "chat_user")
    assert [r.seq for r in below] == [1]
    everything = await reader.newest_first("bd43f4de", "apps/chess-academy", 20_000, 3)
    assert [r.seq for r in everything] == [20000, 19999, 19998]


async def test_the_count_is_of_one_kind_up_to_a_seq(pool) -> None:
    reader = PostgresTimelineReader(pool)
    assert await reader.count("bd43f4de", "apps/chess-academy", 20_000, "chat_user") == 3
    assert await reader.count("bd43f4de", "apps/chess-academy", 9_000, "chat_user") == 2
    assert await reader.count("bd43f4de", "apps/other", 20_100, "chat_user") == 100
    assert await reader.count("bd43f4de", "apps/none", 20_100, "chat_user") == 0


def _plan(database_url: str, sql: str) -> str:
    with psycopg.connect(database_url, autocommit=True, options=pg.CONNECTION_OPTIONS) as conn:
        rows = conn.execute(f"EXPLAIN (ANALYZE, COSTS OFF) {sql}").fetchall()
    return "\n".join(r[0] for r in rows)


async def test_instructions_are_found_through_the_kind_index_not_by_walking_tool_rows(
    pool, database_url
) -> None:
    plan = _plan(database_url, (
        "SELECT seq FROM timeline_entries WHERE instance_id = 'bd43f4de'"
        " AND repo = 'apps/chess-academy' AND seq <= 20000 AND kind = 'chat_user'"
        " ORDER BY seq DESC LIMIT 61"
    ))
    assert "timeline_entries_kind" in plan, plan
    assert "Rows Removed by Filter" not in plan, plan


async def test_a_brief_of_the_long_run_holds_its_instructions(pool, kit) -> None:
    brief = await compose_for(kit.decision(20_000, 20_000), PostgresTimelineReader(pool))
    assert brief is not None
    assert [e.seq for e in brief.entries if e.part == "instructions"] == [1, 9000, 19990]
    assert "instruction 1\n" in brief.text and "elsewhere" not in brief.text
