"""Console logins, kept on the server. The browser's cookie holds only a random
reference to a row here, never the API token: a stolen cookie is not a bearer token,
it ends with its token's revocation, and logging out deletes the row.

Each login carries its own CSRF token, which every form the console serves repeats;
a form posted without it is refused. Only a SHA-256 of the reference is stored (the
CSRF token is useless without the cookie, and the pages must repeat it).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta

from psycopg_pool import AsyncConnectionPool

from seedline_contracts.times import utc_now
from seedline_platform import pg

from ..tokens import digest

LOGIN_DAYS = 7
MAX_COOKIE_CHARS = 100

DDL = """
CREATE TABLE IF NOT EXISTS web_console_logins (
    login_sha256 text PRIMARY KEY,
    token_sha256 text NOT NULL,
    csrf text NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS web_console_logins_expiry ON web_console_logins (expires_at);
"""


@dataclass(frozen=True)
class ConsoleLogin:
    instance_id: str
    csrf: str
    token_sha256: str  # whose streams it holds count against (stream_slots.py)


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "replace")).hexdigest()


def same_secret(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


class ConsoleLogins:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def setup(self) -> None:
        await pg.apply_schema(self._pool, "seedline-web", DDL)

    async def start(self, token: str) -> str:
        """A new login for a live token (checked by the caller); the cookie value."""
        reference = secrets.token_urlsafe(32)
        now = utc_now()
        async with self._pool.connection() as conn:
            await conn.execute("DELETE FROM web_console_logins WHERE expires_at < %s", (now,))
            await conn.execute(
                "INSERT INTO web_console_logins (login_sha256, token_sha256, csrf, created_at,"
                " expires_at) VALUES (%s, %s, %s, %s, %s)",
                (_hash(reference), digest(token), secrets.token_urlsafe(24), now,
                 now + timedelta(days=LOGIN_DAYS)),
            )
        return reference

    async def find(self, reference: str | None) -> ConsoleLogin | None:
        """The login's instance and CSRF token while it and its API token are both live."""
        if not reference or len(reference) > MAX_COOKIE_CHARS:
            return None
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT t.instance_id, l.csrf, l.token_sha256 FROM web_console_logins l JOIN web_tokens t"
                " ON t.token_sha256 = l.token_sha256 WHERE l.login_sha256 = %s"
                " AND l.expires_at > %s AND t.revoked_at IS NULL",
                (_hash(reference), utc_now()),
            )
            row = await cur.fetchone()
        return ConsoleLogin(row[0], row[1], row[2]) if row else None

    async def end(self, reference: str | None) -> None:
        if reference and len(reference) <= MAX_COOKIE_CHARS:
            async with self._pool.connection() as conn:
                await conn.execute("DELETE FROM web_console_logins WHERE login_sha256 = %s",
                                   (_hash(reference),))
