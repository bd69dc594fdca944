"""Applying deploy/postgres-roles.sql, and running a service under its role.

The SQL file is the source of truth: one NOLOGIN owner of every table, one login
role per service with only the DML it uses. This module applies it, sets
passwords, builds each service's connection URL, and holds the schema step a
service should take when it runs under such a role (``apply_schema_or_verify``):
a role that may not create anything must not run DDL, only check that the
owner's migration has created what it needs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from . import pg

OWNER = "seedline_owner"
SERVICE_ROLES: dict[str, str] = {
    "timeline-writer": "seedline_writer",
    "continuity-resolver": "seedline_resolver",
    "seed-composer": "seedline_composer",
    "runner-gateway": "seedline_gateway",
}
SQL_NAME = "postgres-roles.sql"


class SchemaNotReady(RuntimeError):
    """A service's tables are missing and its role may not create them."""


def roles_sql_path() -> Path:
    """deploy/postgres-roles.sql of the checkout this module runs from."""
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "deploy" / SQL_NAME
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"deploy/{SQL_NAME} was not found above {Path(__file__).parent}")


def apply_roles(admin_url: str, path: Path | None = None) -> None:
    """Run the roles file in the database of ``admin_url`` (a superuser's URL). Idempotent."""
    text = (path or roles_sql_path()).read_text()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(text)  # no parameters: sent as one simple query, BEGIN ... COMMIT inside


def set_passwords(admin_url: str, passwords: Mapping[str, str]) -> None:
    """``{role: password}``; for servers that authenticate by password."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        for role, password in passwords.items():
            if role not in SERVICE_ROLES.values():
                raise ValueError(f"{role} is not a Seedline service role")
            statement = sql.SQL("ALTER ROLE {} PASSWORD {}")
            conn.execute(statement.format(sql.Identifier(role), sql.Literal(password)))


def role_url(admin_url: str, role: str, password: str | None = None) -> str:
    """The same server and database as ``admin_url``, logging in as ``role``."""
    params = conninfo_to_dict(admin_url)
    params["user"] = role
    params.pop("password", None)
    if password is not None:
        params["password"] = password
    return make_conninfo(**params)


_TABLE = re.compile(r"CREATE\s+TABLE\s+IF\s+NOT\s+EXISTS\s+(\w+)", re.IGNORECASE)
_INDEX = re.compile(r"CREATE\s+(?:UNIQUE\s+)?INDEX\s+IF\s+NOT\s+EXISTS\s+(\w+)", re.IGNORECASE)


def objects_in(ddl: str) -> list[str]:
    """Names of the tables and indexes an idempotent DDL script creates."""
    return _TABLE.findall(ddl) + _INDEX.findall(ddl)


async def missing_objects(conn: psycopg.AsyncConnection, ddl: str) -> list[str]:
    missing = []
    for name in objects_in(ddl):
        cur = await conn.execute("SELECT to_regclass(%s)", (name,))
        row = await cur.fetchone()
        if row[0] is None:
            missing.append(name)
    return missing


_original_apply_schema = pg.apply_schema


async def apply_schema_or_verify(pool, name: str, ddl: str) -> None:
    """What ``pg.apply_schema`` should do: run the DDL when this role may create
    objects (the embedded default, a superuser URL); otherwise only check that
    every table and index the DDL names exists, and say what to run if not.

    Postgres checks CREATE on the schema before it looks whether a table exists,
    and table ownership before it looks whether an index exists, so a role of
    deploy/postgres-roles.sql fails on ``CREATE ... IF NOT EXISTS`` even when
    everything is there already.
    """
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT has_schema_privilege(current_schema(), 'CREATE')")
        (may_create,) = await cur.fetchone()
        if not may_create:
            missing = await missing_objects(conn, pg.OFFSETS_SQL + ddl)
            if missing:
                raise SchemaNotReady(
                    f"{name}: {', '.join(missing)} missing, and this database role may not create "
                    f"them; run deploy/{SQL_NAME} as the database owner first"
                )
            return
    await _original_apply_schema(pool, name, ddl)
