"""Least privilege in Postgres: deploy/postgres-roles.sql, proven against a real server.

Every service logs in as a role of its own that owns nothing and holds only the
DML it uses; one NOLOGIN role owns the schema. See RELIABILITY.md, Security.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import itertools
import os
from contextlib import AsyncExitStack

import nats
import psycopg
import pytest

from seedline_contracts import subjects
from seedline_continuity_resolver.app import create_app as create_resolver
from seedline_devtools import pg_roles
from seedline_devtools.testing import request, running
from seedline_runner.engines.scripted import ScriptedEngine
from seedline_runner.runner import Runner
from seedline_runner_gateway.app import create_app as create_gateway
from seedline_seed_composer.app import create_app as create_composer
from seedline_timeline_writer.app import create_app as create_writer

pytestmark = pytest.mark.servers

ROLES = pg_roles.SERVICE_ROLES  # service name -> role
PASSWORDS = {role: f"test-{role}" for role in ROLES.values()}
SERVICE_DDL = tuple(pg_roles.service_ddl(service) for service in ROLES)
OWNED = {
    "timeline-writer": {"timeline_entries", "timeline_offsets", "runner_launches"},
    "continuity-resolver": {"conversations", "open_requests", "resolver_offsets"},
    "seed-composer": {"briefs"},
    "runner-gateway": {"gateway_conversations", "machines", "last_opens", "not_woken_told",
                       "gateway_offsets"},
    "seedline-web": {"web_offsets", "web_open_views", "web_tokens"},
}
TABLES = tuple(sorted(set().union(*OWNED.values())))
PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")
READ_PORT = {"timeline_entries": {"SELECT"}, "timeline_offsets": {"SELECT"}}

# What each role may do, table by table; everything not listed is refused.
EXPECTED_GRANTS: dict[str, dict[str, set[str]]] = {
    "seedline_writer": {
        # DELETE: only a forgotten instance's rows (Erasure); it never updates an entry.
        "timeline_entries": {"SELECT", "INSERT", "DELETE", "TRUNCATE"},
        "timeline_offsets": {"SELECT", "INSERT", "UPDATE"},
        "runner_launches": {"SELECT", "INSERT", "DELETE"},
    },
    "seedline_resolver": {
        **READ_PORT,
        "conversations": {"SELECT", "INSERT", "UPDATE", "DELETE"},
        "open_requests": {"SELECT", "INSERT", "UPDATE", "DELETE"},
        "resolver_offsets": {"SELECT", "INSERT", "UPDATE"},
    },
    "seedline_composer": {**READ_PORT, "briefs": {"SELECT", "INSERT", "UPDATE", "DELETE"}},
    "seedline_gateway": {
        # DELETE: a forgotten instance's rows (Erasure); machines and offsets hold none.
        **{table: {"SELECT", "INSERT", "UPDATE", "DELETE"}
           for table in ("gateway_conversations", "last_opens", "not_woken_told")},
        **{table: {"SELECT", "INSERT", "UPDATE"} for table in ("machines", "gateway_offsets")},
    },
    "seedline_web": {
        table: {"SELECT", "INSERT", "UPDATE", "DELETE"} for table in OWNED["seedline-web"]
    },
}

_scratch = itertools.count(1)


def _require_superuser(admin_url: str) -> None:
    with psycopg.connect(admin_url) as conn:
        if not conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0]:
            pytest.skip("the roles file must be applied by a superuser; SEEDLINE_DATABASE_URL is not one")


@pytest.fixture
def roles_db(database_url: str) -> str:
    """A fresh database with deploy/postgres-roles.sql applied and test passwords set."""
    _require_superuser(database_url)
    pg_roles.apply_roles(database_url)
    pg_roles.set_passwords(database_url, PASSWORDS)
    return database_url


def as_role(admin_url: str, role: str) -> psycopg.Connection:
    return psycopg.connect(pg_roles.role_url(admin_url, role, PASSWORDS.get(role)), autocommit=True)


def _catalog(url: str) -> tuple[list, list]:
    with psycopg.connect(url) as conn:
        columns = conn.execute(
            "SELECT table_name, ordinal_position, column_name, data_type, is_nullable, column_default"
            " FROM information_schema.columns WHERE table_schema = 'public'"
            " ORDER BY table_name, ordinal_position"
        ).fetchall()
        indexes = conn.execute(
            "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'"
            " ORDER BY tablename, indexname"
        ).fetchall()
    return columns, indexes


def test_roles_file_is_idempotent_and_creates_exactly_the_services_tables(roles_db, postgres_server):
    pg_roles.apply_roles(roles_db)  # a second run changes nothing and fails on nothing
    scratch = f"seedline_ddl_{os.getpid()}_{next(_scratch)}"
    with psycopg.connect(postgres_server.admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{scratch}"')
    try:
        services_url = postgres_server.url_for(scratch)
        with psycopg.connect(services_url, autocommit=True) as conn:
            for ddl in SERVICE_DDL:  # what the services create when they may
                conn.execute(ddl)
        assert _catalog(roles_db) == _catalog(services_url)
    finally:
        with psycopg.connect(postgres_server.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')
    with psycopg.connect(roles_db) as conn:
        owners = dict(conn.execute(
            "SELECT tablename, tableowner FROM pg_tables WHERE schemaname = 'public'").fetchall())
    assert owners == {table: pg_roles.OWNER for table in TABLES}


def test_no_service_role_is_privileged_or_owns_anything(roles_db):
    with psycopg.connect(roles_db) as conn:
        attrs = {
            name: rest for name, *rest in conn.execute(
                "SELECT rolname, rolsuper, rolcreaterole, rolcreatedb, rolreplication, rolbypassrls,"
                " rolcanlogin FROM pg_roles WHERE rolname LIKE 'seedline\\_%'"
            ).fetchall()
        }
        memberships = conn.execute(
            "SELECT count(*) FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid"
            " WHERE r.rolname LIKE 'seedline\\_%'"
        ).fetchone()[0]
    assert attrs[pg_roles.OWNER] == [False, False, False, False, False, False]  # cannot log in
    for role in ROLES.values():
        assert attrs[role] == [False, False, False, False, False, True], role
    assert memberships == 0  # no service role holds the owner's rights through membership
    for role in ROLES.values():
        with as_role(roles_db, role) as conn:
            for statement in (
                "CREATE ROLE seedline_intruder",
                "CREATE DATABASE seedline_intruder",
                "CREATE SCHEMA intruder",
                "CREATE TABLE intruder (a int)",
                "CREATE TEMP TABLE intruder (a int)",
                "DROP TABLE timeline_entries",
                "ALTER TABLE briefs ADD COLUMN intruder int",
                "CREATE INDEX IF NOT EXISTS timeline_entries_repo ON timeline_entries (seq)",
                f"SET ROLE {pg_roles.OWNER}",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(statement)


def test_each_role_holds_exactly_the_grants_its_service_uses(roles_db):
    with psycopg.connect(roles_db) as conn:
        for role in ROLES.values():
            for table in TABLES:
                held = {
                    p for p in PRIVILEGES
                    if conn.execute("SELECT has_table_privilege(%s, %s, %s)", (role, table, p)).fetchone()[0]
                }
                assert held == EXPECTED_GRANTS[role].get(table, set()), (role, table)


def test_the_gateway_reads_when_timeline_entries_were_written_and_no_other_column(roles_db):
    with psycopg.connect(roles_db) as conn:
        columns = conn.execute(
            "SELECT column_name FROM information_schema.column_privileges"
            " WHERE grantee = 'seedline_gateway' AND table_name = 'timeline_entries'"
            " AND privilege_type = 'SELECT'").fetchall()
    assert sorted(c for (c,) in columns) == ["at", "instance_id", "repo", "seq", "session_id"]


def test_the_committed_roles_file_is_the_generated_one():
    assert pg_roles.roles_sql_path().read_text() == pg_roles.roles_sql(), (
        "run `make schema` and commit deploy/postgres-roles.sql"
    )


def test_no_service_applies_another_services_ddl():
    """One owner per table (DESIGN.md rule 8): each DDL creates exactly its own tables."""
    for service, tables in OWNED.items():
        assert set(pg_roles.owned_tables(service)) == tables, service
    owners = [table for tables in OWNED.values() for table in tables]
    assert len(owners) == len(set(owners))  # no table has two owners
    for role, tables in EXPECTED_GRANTS.items():
        service = next(s for s, r in ROLES.items() if r == role)
        writes = {t for t, privileges in tables.items() if privileges - {"SELECT"}}
        assert writes <= OWNED[service], role  # a role writes only its own service's tables


def test_a_service_cannot_read_or_write_another_services_tables(roles_db):
    with as_role(roles_db, "seedline_writer") as writer:
        writer.execute(
            "INSERT INTO timeline_entries VALUES (1, 'e-1', 'i', 'r', 's', 'chat_user', 'x', 'now',"
            " NULL, NULL, 1)")
        writer.execute("INSERT INTO timeline_offsets VALUES ('timeline', 1)")
        for statement in ("UPDATE timeline_entries SET content = 'forged'",
                          "DELETE FROM timeline_offsets", "SELECT * FROM briefs",
                          "SELECT * FROM conversations"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                writer.execute(statement)
    for reader in ("seedline_composer", "seedline_resolver"):
        with as_role(roles_db, reader) as conn:
            assert conn.execute("SELECT count(*) FROM timeline_entries").fetchone()[0] == 1
            assert conn.execute("SELECT applied_seq FROM timeline_offsets").fetchone() == (1,)
            for statement in (
                "INSERT INTO timeline_entries VALUES (2, 'e-2', 'i', 'r', 's', 'chat_user', 'x',"
                " 'now', NULL, NULL, 2)",
                "UPDATE timeline_entries SET content = 'forged'",
                "UPDATE timeline_offsets SET applied_seq = 99",
                "SELECT * FROM runner_launches",
                "SELECT * FROM gateway_conversations",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(statement)
    with as_role(roles_db, "seedline_composer") as composer:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            composer.execute("SELECT * FROM conversations")
    with as_role(roles_db, "seedline_resolver") as resolver:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            resolver.execute("INSERT INTO briefs VALUES ('s', 1, 'forged', 1, 1, 0, 1, 'x')")
    with as_role(roles_db, "seedline_gateway") as gateway:
        # When a conversation last wrote to the timeline (its idle sweep), never what.
        assert gateway.execute(
            "SELECT session_id, at FROM timeline_entries WHERE instance_id = 'i' AND repo = 'r'"
            " ORDER BY seq DESC LIMIT 1").fetchone() == ("s", "now")
        for statement in ("SELECT * FROM briefs", "SELECT * FROM timeline_entries",
                          "SELECT content FROM timeline_entries",
                          "SELECT * FROM open_requests", "SELECT * FROM resolver_offsets"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                gateway.execute(statement)
    with as_role(roles_db, "seedline_web") as web:
        for statement in ("SELECT * FROM timeline_entries", "SELECT * FROM conversations"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                web.execute(statement)


def _settings_for(settings, roles_db: str, service: str):
    role = ROLES[service]
    return dataclasses.replace(settings, database_url=pg_roles.role_url(roles_db, role, PASSWORDS[role]))


async def _wait_for(probe, timeout: float = 15.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not (value := await probe()):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)
    return value


async def test_four_services_under_their_own_roles_complete_a_briefed_open(settings, roles_db):
    async with AsyncExitStack() as stack:
        for service, create in (("timeline-writer", create_writer), ("continuity-resolver", create_resolver),
                                ("seed-composer", create_composer), ("runner-gateway", create_gateway)):
            await stack.enter_async_context(running(create(_settings_for(settings, roles_db, service))))
        nc = await nats.connect(settings.nats_url)
        stack.push_async_callback(nc.close)
        engine = ScriptedEngine()
        runner = Runner(nc, "mac-mini-1", "Mac mini", {"scripted": engine}, presence_interval=1.0)
        await runner.start()
        stack.push_async_callback(runner.stop)
        base = {"instance_id": "bd43f4de", "repo": "apps/chess-academy"}
        for n in range(1, 4):
            reply = await request(nc, subjects.API_TIMELINE_APPEND, {
                **base, "entry_id": f"e-{n}", "session_id": "csess_old", "kind": "chat_assistant",
                "content": f"entry number {n}", "at": "2026-08-17T10:00:00Z", "engine": "scripted"})
            assert reply["ok"], reply
        opened = await request(nc, subjects.API_SESSIONS_OPEN, {
            **base, "engine": "scripted", "node_id": "mac-mini-1", "request_id": "r-1",
            "instruction": "What were we doing?"}, timeout=20)
        assert opened["ok"], opened
        assert opened["outcome"] == "briefed" and opened["brief"]["rows"] == 3
        brief = await request(nc, subjects.API_BRIEFS_GET, {"session_id": opened["session_id"]})
        assert hashlib.sha256(brief["text"].encode()).hexdigest() == opened["brief"]["sha256"]
        assert await request(nc, subjects.API_SESSIONS_OPEN, {  # the resolver's ledger answers again
            **base, "engine": "scripted", "node_id": "mac-mini-1", "request_id": "r-1"}) == opened

        async def answered():  # the engine's reply went through ingest into the projection
            rows = await request(nc, subjects.API_TIMELINE_READ, {**base, "session_id": opened["session_id"]})
            return [r for r in rows["entries"] if r["kind"] == "chat_assistant"]

        rows = await _wait_for(answered)
        assert f"seed sha256 {opened['brief']['sha256']}" in rows[0]["content"]
        with psycopg.connect(roles_db) as conn:
            offsets = {
                table: dict(conn.execute(f"SELECT projection, applied_seq FROM {table}").fetchall())
                for table in ("timeline_offsets", "resolver_offsets", "gateway_offsets")
            }
            live = conn.execute(
                "SELECT session_id, node_id FROM gateway_conversations WHERE state = 'live'"
            ).fetchall()
            logins = set(conn.execute(
                "SELECT DISTINCT application_name, usename FROM pg_stat_activity"
                " WHERE datname = current_database() AND application_name = ANY(%s)", (list(ROLES),)
            ).fetchall())
        services = {s: r for s, r in ROLES.items() if s != "seedline-web"}
        assert logins == set(services.items())  # each service really is connected as its own role
        assert set(offsets["resolver_offsets"]) == {"timeline", "sessions"}
        assert offsets["timeline_offsets"]["timeline"] >= 5
        assert live == [(opened["session_id"], "mac-mini-1")]


async def test_a_service_under_its_role_starts_without_running_ddl(settings, roles_db):
    app = create_writer(_settings_for(settings, roles_db, "timeline-writer"))
    try:
        await app.start()
    finally:
        await app.stop()
