"""Who is asking: a bearer token (HTTP API, MCP over HTTP) or the console's login,
each resolving to the one instance its token was created for."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from .backend import Backend
from .console.logins import ConsoleLogin, ConsoleLogins
from .errors import WebError, other_instance, unauthorized
from .tenant import Tenant
from .tokens import TokenStore

COOKIE = "seedline_login"


def bearer(connection: HTTPConnection) -> str | None:
    """The request's bearer token. Two Authorization headers are refused, not read one way
    here and another by a proxy in front (which one "wins" differs between servers)."""
    headers = connection.headers.getlist("authorization")
    if len(headers) > 1:
        raise WebError("invalid_request", f"The request has {len(headers)} Authorization "
                       "headers; send one, `Authorization: Bearer <token>`.")
    header = headers[0] if headers else ""
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


class Gate:
    def __init__(self, tokens: TokenStore, backend: Backend,
                 logins: ConsoleLogins | None = None) -> None:
        self.tokens = tokens
        self.backend = backend
        self.logins = logins

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
        """The token's instance; when the address names one, it must be the same. The
        token was checked before the body was read (intake.TokenFirst) when it could be."""
        checked = connection.scope.get("state", {})
        token = bearer(connection)
        if checked.get("token") == token and checked.get("instance"):
            mine = checked["instance"]
        else:
            mine = await self.instance_for(token)
        if instance_id is not None and instance_id != mine:
            raise other_instance(instance_id)
        return Tenant(self.backend, mine)

    async def still_allowed(self, token: str, instance_id: str) -> bool:
        """Whether a token checked earlier is still live for the same instance."""
        return await self.tokens.instance_of(token) == instance_id

    async def console_login(self, connection: HTTPConnection) -> ConsoleLogin | None:
        if self.logins is None:
            return None
        return await self.logins.find(connection.cookies.get(COOKIE))

    async def console_tenant(self, connection: HTTPConnection) -> Tenant | None:
        login = await self.console_login(connection)
        return Tenant(self.backend, login.instance_id) if login else None
