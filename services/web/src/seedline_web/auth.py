"""Who is asking: a bearer token (HTTP API, MCP over HTTP) or the console's cookie,
each resolving to the one instance its token was created for."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from .backend import Backend
from .errors import WebError, other_instance, unauthorized
from .tenant import Tenant
from .tokens import TokenStore

COOKIE = "seedline_token"


def bearer(connection: HTTPConnection) -> str | None:
    header = connection.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


class Gate:
    def __init__(self, tokens: TokenStore, backend: Backend) -> None:
        self.tokens = tokens
        self.backend = backend

    async def instance_for(self, token: str | None) -> str:
        if not token:
            raise unauthorized()
        instance = await self.tokens.instance_of(token)
        if instance is None:
            raise WebError(
                "unauthorized",
                "This token is not known or was revoked; ask an operator for a new one "
                "(`seedline tokens create --instance <instance>`).",
            )
        return instance

    async def tenant(self, connection: HTTPConnection, instance_id: str | None = None) -> Tenant:
        """The token's instance; when the address names one, it must be the same."""
        mine = await self.instance_for(bearer(connection))
        if instance_id is not None and instance_id != mine:
            raise other_instance(instance_id)
        return Tenant(self.backend, mine)

    async def console_tenant(self, connection: HTTPConnection) -> Tenant | None:
        token = connection.cookies.get(COOKIE)
        if not token:
            return None
        instance = await self.tokens.instance_of(token)
        return Tenant(self.backend, instance) if instance else None
