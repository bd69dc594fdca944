"""The open path's repo queries keep to the repo index once prepared.

psycopg prepares a statement after a few runs, and Postgres may then use a
generic plan that ignores the parameter values. A quiet repo beside a busy one
must still be found through the repo index, not by walking every newer row.
"""

import psycopg
import pytest

from seedline_platform import pg
from seedline_timeline_view.port import NO_UPPER_SEQ
from seedline_timeline_view.postgres import REPO_HEAD_SQL
from seedline_timeline_writer.schema import DDL

pytestmark = pytest.mark.servers

NO_UPPER = NO_UPPER_SEQ


def _busy_and_quiet_repos(conn) -> None:
    conn.execute(DDL)
    conn.execute(
        "INSERT INTO timeline_entries SELECT g, 'q'||g, 'i', 'quiet', 's', 'system', 'x', 'at',"
        " NULL, NULL, g FROM generate_series(1, 500) g"
    )
    conn.execute(
        "INSERT INTO timeline_entries SELECT g, 'b'||g, 'i', 'busy', 's', 'system', 'x', 'at',"
        " NULL, NULL, g - 1000 FROM generate_series(1001, 60000) g"
    )
    conn.execute("ANALYZE timeline_entries")


def _plan_of_prepared_repo_head(conn) -> str:
    sql = REPO_HEAD_SQL
    for n in (1, 2, 3):
        sql = sql.replace("%s", f"${n}", 1)
    conn.execute(f"PREPARE head(text, text, bigint) AS {sql}")
    assert conn.execute(f"EXECUTE head('i', 'quiet', {NO_UPPER})").fetchone() == (500, 500)
    rows = conn.execute(f"EXPLAIN (ANALYZE, COSTS OFF) EXECUTE head('i', 'quiet', {NO_UPPER})")
    return "\n".join(r[0] for r in rows.fetchall())


def test_a_generic_plan_would_walk_the_primary_key(database_url):
    """The hazard itself, so the test below is one that could fail."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        _busy_and_quiet_repos(conn)
        conn.execute("SET plan_cache_mode = force_generic_plan")
        assert "timeline_entries_pkey" in _plan_of_prepared_repo_head(conn)


def test_service_connections_plan_with_real_values(database_url):
    with psycopg.connect(database_url, autocommit=True, options=pg.CONNECTION_OPTIONS) as conn:
        _busy_and_quiet_repos(conn)
        plan = _plan_of_prepared_repo_head(conn)
        assert "timeline_entries_repo" in plan, plan
        assert "Rows Removed by Filter" not in plan, plan


def test_the_writers_read_of_a_batchs_repo_ordinals_keeps_to_the_repo_index(database_url):
    from seedline_timeline_writer.store import REPO_ORDINALS_SQL

    with psycopg.connect(database_url, autocommit=True, options=pg.CONNECTION_OPTIONS) as conn:
        _busy_and_quiet_repos(conn)
        params = (["i", "i", "i"], ["quiet", "busy", "new"])
        found = conn.execute(REPO_ORDINALS_SQL, params).fetchall()
        assert sorted(found) == [("i", "busy", 59000), ("i", "new", None), ("i", "quiet", 500)]
        rows = conn.execute(f"EXPLAIN (ANALYZE, COSTS OFF) {REPO_ORDINALS_SQL}", params)
        plan = "\n".join(r[0] for r in rows.fetchall())
        assert "timeline_entries_repo" in plan, plan
        assert "Rows Removed by Filter" not in plan, plan


def test_the_newest_entry_of_each_live_conversation_is_one_probe_of_the_session_index(
        database_url):
    """The gateway asks it of every live conversation at each idle sweep: a conversation of
    59,000 entries is read at its newest, not walked."""
    from seedline_timeline_view.postgres import NEWEST_AT_SQL

    with psycopg.connect(database_url, autocommit=True, options=pg.CONNECTION_OPTIONS) as conn:
        _busy_and_quiet_repos(conn)
        conn.execute("UPDATE timeline_entries SET at = '2026-12-01T10:00:00Z',"
                     " session_id = CASE repo WHEN 'quiet' THEN 'q' ELSE 's' END")
        conn.execute("UPDATE timeline_entries SET at = '2026-12-01T11:00:00Z' WHERE seq = 60000")
        conn.execute("ANALYZE timeline_entries")
        params = (["i", "i", "i"], ["busy", "quiet", "new"], ["s", "q", "n"])
        found = dict(conn.execute(NEWEST_AT_SQL, params).fetchall())
        assert {session: at.hour for session, at in found.items()} == {"s": 11, "q": 10}
        rows = conn.execute(f"EXPLAIN (ANALYZE, COSTS OFF) {NEWEST_AT_SQL}", params)
        plan = "\n".join(r[0] for r in rows.fetchall())
        assert "Index Scan Backward using timeline_entries_session" in plan, plan
        assert "rows=1 loops=3" in plan, plan  # one entry read per conversation asked
        assert "timeline_entries_pkey" not in plan and "Sort" not in plan, plan
