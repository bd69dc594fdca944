"""The operator's path to the token table: what `seedline tokens` runs. It opens the
database the web process uses, with the web's own table code, so the table keeps one
owner whether or not the web process is running."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import AsyncIterator

from seedline_contracts.tokens import name_problem
from seedline_platform import pg
from seedline_platform.settings import Settings

from .tokens import TokenRecord, TokenStore


class TokenAdminError(ValueError):
    """A request an operator can correct; the message says how."""


class UnknownToken(TokenAdminError):
    """No token has that id."""


@asynccontextmanager
async def token_store(settings: Settings) -> AsyncIterator[TokenStore]:
    pool = await pg.open_pool(settings.database_url, "seedline-tokens", max_size=1)
    try:
        store = TokenStore(pool)
        await store.setup()
        yield store
    finally:
        await pool.close()


# Characters a subject wildcard or a shell word boundary would make of an instance
# name: a token for `>` or `demo.>` must never read as "every instance".
NOT_IN_INSTANCE_NAMES = frozenset(">*")


def instance_name_problem(instance_id: object) -> str | None:
    """Why a name cannot be an instance a token is for (CONTRACT.md, Conventions), or None."""
    problem = name_problem(instance_id)
    if problem is not None:
        return problem
    assert isinstance(instance_id, str)
    if any(c.isspace() for c in instance_id):
        return "contains whitespace; an instance name is one word"
    wild = sorted(set(instance_id) & NOT_IN_INSTANCE_NAMES)
    if wild:
        return (f"contains {' and '.join(repr(c) for c in wild)}, which stand for other "
                "instances in subjects; use the instance's own name")
    return None


async def create_token(settings: Settings, instance_id: str, label: str) -> tuple[TokenRecord,
                                                                                   str]:
    problem = instance_name_problem(instance_id)
    if problem:
        raise TokenAdminError(f"--instance {problem}; give the instance's name, e.g. bd43f4de.")
    async with token_store(settings) as store:
        return await store.create(instance_id, label)


async def list_tokens(settings: Settings, instance_id: str | None) -> list[TokenRecord]:
    async with token_store(settings) as store:
        return await store.list(instance_id)


async def revoke_token(settings: Settings, token_id: str) -> TokenRecord:
    async with token_store(settings) as store:
        record = await store.revoke(token_id)
    if record is None:
        raise UnknownToken(f"No token with the id {token_id!r}; `seedline tokens list` shows "
                              "the ids.")
    return record
