"""Checks that the servers a command needs answer, before it starts any work."""

from __future__ import annotations

from seedline_platform.settings import Settings

from .config import safe_url
from .errors import START_HINT, Unreachable
from .nats_client import connected


async def nats_answers(settings: Settings) -> None:
    async with connected(settings):
        pass


async def postgres_answers(settings: Settings) -> None:
    import psycopg

    try:
        conn = await psycopg.AsyncConnection.connect(settings.database_url, connect_timeout=3)
    except Exception:
        raise Unreachable(
            f"Cannot reach Postgres at {safe_url(settings.database_url)}. {START_HINT}, "
            "or set SEEDLINE_DATABASE_URL (or SEEDLINE_HOME to the folder `seedline up` uses)."
        ) from None
    await conn.close()
