"""Applying deploy/postgres-roles.sql, and running a service under its role.

The SQL file is the source of truth: one NOLOGIN owner of every table, one login
role per service with only the DML it uses. This module applies it, sets
passwords and builds each service's connection URL. Under such a role a service
runs no DDL: pg.apply_schema only checks that the owner's migration created what
it needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo


OWNER = "seedline_owner"
SERVICE_ROLES: dict[str, str] = {
    "timeline-writer": "seedline_writer",
    "continuity-resolver": "seedline_resolver",
    "seed-composer": "seedline_composer",
    "runner-gateway": "seedline_gateway",
}
SQL_NAME = "postgres-roles.sql"


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


