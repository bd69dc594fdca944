"""Driver errors become the project's own Outage at the adapter, once: the Postgres pool, the
JetStream publisher and the streams' readers, against a real Postgres and a real nats-server. Every other error
passes through unchanged, so a fault is never waited on as if it were an outage."""

from __future__ import annotations

import nats
import psycopg
import pytest

from seedline_platform import pg
from seedline_platform.outage import DatabaseUnavailable, Outage, StreamsUnavailable, is_outage
from seedline_platform.publishing import JetStreamPublisher

pytestmark = pytest.mark.servers


async def test_a_connection_the_database_ends_is_database_unavailable(database_url):
    pool = await pg.open_pool(database_url, "outage-test", max_size=2)
    try:
        with pytest.raises(DatabaseUnavailable) as caught:
            async with pool.connection() as conn:
                await conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        assert isinstance(caught.value, Outage)
        assert isinstance(caught.value.__cause__, psycopg.OperationalError)
        async with pool.connection() as conn:  # the pool goes on with a new connection
            assert (await (await conn.execute("SELECT 1")).fetchone()) == (1,)
    finally:
        await pool.close()


async def test_a_fault_in_the_query_passes_through_as_it_is(database_url):
    pool = await pg.open_pool(database_url, "outage-test", max_size=1)
    try:
        with pytest.raises(psycopg.errors.UndefinedTable) as caught:
            async with pool.connection() as conn:
                await conn.execute("SELECT * FROM no_such_table")
        assert not is_outage(caught.value)
    finally:
        await pool.close()


async def test_a_database_that_cannot_be_reached_is_database_unavailable():
    pool = pg.OutagePool("postgresql://nobody@127.0.0.1:1/none", min_size=0, max_size=1,
                         open=False, timeout=0.5, kwargs={"connect_timeout": 1})
    await pool.open(wait=False)
    try:
        with pytest.raises(DatabaseUnavailable):
            async with pool.connection():
                pass
    finally:
        await pool.close()


async def test_a_publish_no_stream_takes_is_streams_unavailable(nats_server):
    nc = await nats.connect(nats_server.url)
    try:
        with pytest.raises(StreamsUnavailable) as caught:
            await JetStreamPublisher(nc.jetstream()).publish([("nowhere.at.all", b"{}", None)])
        assert is_outage(caught.value)
    finally:
        await nc.close()


def test_a_plain_error_is_not_an_outage():
    assert not is_outage(ValueError("a bug"))
    assert not is_outage(psycopg.OperationalError("raw, not through a pool"))


async def test_reads_of_a_stream_that_does_not_answer_are_streams_unavailable(nats_server):
    from seedline_contracts.events import ContinuityDecided
    from seedline_platform.replay import last_seq
    from seedline_platform.session_reads import newest_event

    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream(prefix="$JS.nowhere.API", timeout=0.5)  # nothing answers there
        with pytest.raises(StreamsUnavailable):
            await last_seq(js, "SEEDLINE_TIMELINE")
        with pytest.raises(StreamsUnavailable):
            await newest_event(js, "csess_a", ContinuityDecided)
    finally:
        await nc.close()
