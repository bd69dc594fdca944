"""API tokens, each for one instance. The web process owns this table; the
`seedline tokens` commands reach it through this module and nothing else.

Only a SHA-256 of each token is stored. A token is 32 random bytes, so a fast
hash is enough: there is nothing to guess from, unlike a password.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from psycopg_pool import AsyncConnectionPool

from seedline_platform import pg
from seedline_contracts.times import utc_now

PREFIX = "slt_"
MAX_LABEL_CHARS = 200
MAX_TOKEN_CHARS = 200

DDL = """
CREATE TABLE IF NOT EXISTS web_tokens (
    token_id text PRIMARY KEY,
    instance_id text NOT NULL,
    label text NOT NULL DEFAULT '',
    token_sha256 text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz
);
"""


@dataclass(frozen=True)
class TokenRecord:
    token_id: str
    instance_id: str
    label: str
    created_at: datetime
    revoked_at: datetime | None


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


class TokenStore:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def setup(self) -> None:
        await pg.apply_schema(self._pool, "seedline-web", DDL)

    async def create(self, instance_id: str, label: str = "") -> tuple[TokenRecord, str]:
        """A new token for the instance; the secret is returned once and never stored."""
        token = PREFIX + secrets.token_urlsafe(32)
        record = TokenRecord("tok_" + secrets.token_hex(6), instance_id, label[:MAX_LABEL_CHARS],
                             utc_now(), None)
        async with self._pool.connection() as conn:
            await conn.execute(
                "INSERT INTO web_tokens (token_id, instance_id, label, token_sha256, created_at)"
                " VALUES (%s, %s, %s, %s, %s)",
                (record.token_id, record.instance_id, record.label, digest(token),
                 record.created_at),
            )
        return record, token

    async def instance_of(self, token: str) -> str | None:
        """The instance a live token is for, or None for an unknown or revoked one."""
        if not token.startswith(PREFIX) or len(token) > MAX_TOKEN_CHARS:
            return None
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT instance_id FROM web_tokens WHERE token_sha256 = %s"
                " AND revoked_at IS NULL",
                (digest(token),),
            )
            row = await cur.fetchone()
        return row[0] if row else None

    async def list(self, instance_id: str | None = None) -> list[TokenRecord]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT token_id, instance_id, label, created_at, revoked_at FROM web_tokens"
                " WHERE %s::text IS NULL OR instance_id = %s ORDER BY created_at, token_id",
                (instance_id, instance_id),
            )
            return [TokenRecord(*row) for row in await cur.fetchall()]

    async def revoke(self, token_id: str) -> TokenRecord | None:
        """Revoke by id; None when no such token exists. Revoking twice changes nothing."""
        async with self._pool.connection() as conn:
            await conn.execute(
                "UPDATE web_tokens SET revoked_at = %s WHERE token_id = %s AND revoked_at IS NULL",
                (utc_now(), token_id),
            )
            cur = await conn.execute(
                "SELECT token_id, instance_id, label, created_at, revoked_at FROM web_tokens"
                " WHERE token_id = %s",
                (token_id,),
            )
            row = await cur.fetchone()
        return TokenRecord(*row) if row else None
