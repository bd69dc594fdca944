"""Composition root of the web process: the HTTP API, the console and MCP over HTTP,
served by uvicorn in the service's own event loop."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
from contextlib import asynccontextmanager
from dataclasses import dataclass

import nats.micro
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect, HTTPConnection
from starlette.routing import Match
from starlette.routing import Route as AsgiRoute

from seedline_contracts import CONTRACT_VERSION
from seedline_platform import erasure, natsio, pg
from seedline_platform.app_base import in_route, parts_of
from seedline_platform.erasure import ErasureFollower
from seedline_platform.logging import get_logger
from seedline_platform.routing import Kind, Route, bind
from seedline_platform.sending import sending_as
from seedline_platform.sealing import sealer_for
from seedline_platform.settings import Settings

from . import docs, http_api, wire
from .auth import Gate, bearer
from .backend import Backend
from .console import conversation, live, pages
from .console.logins import ConsoleLogins
from .errors import WebError, unavailable
from .intake import CLIENT_CLOSED, BodyDeadline, TokenFirst
from .limits import BodyLimit, BodyTooLarge
from .metrics import Measured, WebMetrics
from .mcp_tools import build_server
from .openapi import FILE as OPENAPI_FILE, openapi_document, render
from .opens import OpensProjection
from .routes import routes
from .stream_slots import StreamSlots
from .serving import HttpServer
from .tenant import Tenant
from .tokens import TokenStore

NAME = "seedline-web"
VERSION = CONTRACT_VERSION
log = get_logger(__name__)

# The instance of the bearer token of the MCP request being answered. The SDK carries
# each message's context into the tool call, so a call sees its own request's token.
MCP_INSTANCE: contextvars.ContextVar[str | None] = contextvars.ContextVar("mcp_instance",
                                                                          default=None)


def _error(exc: WebError, headers: dict | None = None) -> Response:
    return Response(exc.body(), status_code=exc.status, media_type="application/json",
                    headers=headers)


@dataclass
class WebParts:
    http: HttpServer
    opens: OpensProjection
    forgetting: ErasureFollower


# A forgotten instance's tokens and opens go (CONTRACT.md Erasure); console logins first:
# they are found through their token.
FORGET_STATEMENTS = (
    "DELETE FROM web_console_logins WHERE token_sha256 IN"
    " (SELECT token_sha256 FROM web_tokens WHERE instance_id = %s)",
    "DELETE FROM web_tokens WHERE instance_id = %s",
    "DELETE FROM web_open_views WHERE instance_id = %s",
)


class WebApp:
    name = NAME

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.nc = None
        self.js = None
        self.pool = None
        self.backend: Backend | None = None
        self.gate: Gate | None = None
        self.tokens: TokenStore | None = None
        self.logins: ConsoleLogins | None = None
        self.routing = routes(settings)
        self.parts: WebParts | None = None
        self.streams = StreamSlots(settings.web_max_streams_per_token,
                                   settings.web_max_streams_per_client)
        self.metrics = WebMetrics()
        self.metrics.streams.set_function(lambda: self.streams.open)
        self.mcp = build_server(self._mcp_tenant)
        self.fastapi = self._build_fastapi()
        # Outermost first: count every answer, bound the body's time, check the token
        # before reading the body, bound its size (intake.py says why in that order).
        self.asgi = Measured(BodyDeadline(TokenFirst(
            BodyLimit(self.fastapi, settings.web_max_body_bytes),
            lambda: self.gate.instance_for if self.gate is not None else None),
            settings.web_body_timeout_seconds), self.metrics)
        self._micro = None

    # -- lifecycle (the shape every service has: start, run, stop) ----------------------

    async def start(self) -> None:
        s = self.settings
        self.nc = await natsio.connect(s.nats_servers, NAME)
        self.js = self.nc.jetstream()
        await natsio.ensure_streams(self.js, replicas=s.stream_replicas)
        await natsio.enforce_durability(self.nc, self.js, s.nats_monitor_url, s.strict_durability)
        self.pool = await pg.open_pool(s.database_url, NAME)
        self.tokens = TokenStore(self.pool)
        await self.tokens.setup()
        self.logins = ConsoleLogins(self.pool)
        await self.logins.setup()
        self.backend = Backend(self.nc, self.js, s.open_timeout_seconds, sealer_for(self.js, s),
                               home=s.home)
        self.gate = Gate(self.tokens, self.backend, self.logins)
        opens = OpensProjection(self.js, self.pool, self._row(OpensProjection.apply))
        self.parts = WebParts(
            http=HttpServer(self.asgi, s),
            opens=opens,
            forgetting=ErasureFollower(self.js, erasure.dropping(self.pool, FORGET_STATEMENTS),
                                       s.stream_replicas, opens.forgotten),
        )
        await self.parts.opens.setup()
        # What its pages and tools send is checked against the row (the server's tasks
        # start inside it and keep it).
        with sending_as(self._row(HttpServer.serve)):
            await self.parts.http.start()
        # Found by service discovery like the four services, so `seedline status` lists it.
        self._micro = await nats.micro.add_service(
            self.nc, name=NAME, version=f"{VERSION}.0",  # discovery wants x.y.z
            description="HTTP API, console and MCP",
            metadata={"http_url": self.url, "pid": str(os.getpid())})
        log.info("ready", url=self.url)

    def _row(self, handler) -> Route:
        return next(route for route in self.routing if route.handler is handler)

    async def run(self) -> None:
        """Every row of the table: the projection's consumer and each loop (the HTTP server,
        the erasures followed)."""
        parts = parts_of(self.parts)
        await asyncio.gather(self.parts.opens.run(), *(
            in_route(route, bind(route.handler, parts))()
            for route in self.routing if route.kind is Kind.LOOP))

    async def stop(self) -> None:
        if self._micro is not None:
            with contextlib.suppress(Exception):
                await self._micro.stop()
        if self.parts is not None:
            await self.parts.http.stop()
            await self.parts.opens.consumer.stop(timeout=2.0)  # what it holds goes back now
        if self.nc is not None and not self.nc.is_closed:
            await self.nc.close()
        if self.pool is not None:
            await self.pool.close()

    @property
    def opens(self) -> OpensProjection:
        return self.parts.opens

    @property
    def port(self) -> int:
        found = self.parts.http.port if self.parts is not None else None
        return found or self.settings.web_port

    @property
    def url(self) -> str:
        host = self.settings.web_host
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        return f"http://{shown}:{self.port}"

    # -- the ASGI app --------------------------------------------------------------------

    async def _mcp_tenant(self) -> Tenant:
        instance = MCP_INSTANCE.get()
        if instance is None or self.backend is None:
            raise unavailable()
        return Tenant(self.backend, instance)

    def _build_fastapi(self) -> FastAPI:
        # Called for the session manager it creates; the route is mounted below, gated.
        self.mcp.streamable_http_app(
            streamable_http_path="/mcp", stateless_http=True, json_response=True,
            max_request_body_size=self.settings.web_max_body_bytes,
            # Every request needs a bearer token, which a rebinding page cannot have.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        manager = self.mcp.session_manager

        @asynccontextmanager
        async def lifespan(_app: FastAPI):
            async with manager.run():
                yield

        app = FastAPI(title="Seedline HTTP API", version=VERSION, lifespan=lifespan,
                      description=DESCRIPTION, docs_url=None, redoc_url=None)
        docs.serve(app)
        app.state.web = self
        app.include_router(http_api.router)
        app.include_router(pages.router)
        app.include_router(conversation.router)
        app.include_router(live.router)
        app.router.routes.append(AsgiRoute("/mcp", endpoint=_McpGate(StreamableHTTPASGIApp(manager),
                                                                 self), methods=None))

        public = {"security": []}

        @app.get("/healthz", response_class=Response, openapi_extra=public,
                 responses=wire.replies(wire.Health, 200, guarded=False),
                 summary="The process is up")
        async def healthz() -> Response:
            return http_api.json_response(wire.Health(ok=True, checks={"process": "up"}))

        @app.get("/readyz", response_class=Response, openapi_extra=public,
                 responses=wire.replies(wire.Health, 200, 503, guarded=False),
                 summary="NATS and Postgres answer")
        async def readyz() -> Response:
            checks = await self._checks()
            ok = all(v == "ok" for v in checks.values())
            return http_api.json_response(wire.Health(ok=ok, checks=checks), 200 if ok else 503)

        @app.get("/metrics", include_in_schema=False)
        async def metrics() -> Response:
            return Response(generate_latest(self.metrics.registry),
                            media_type=CONTENT_TYPE_LATEST)

        @app.exception_handler(WebError)
        async def on_web_error(_request: Request, exc: WebError) -> Response:
            headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
            return _error(exc, headers)

        @app.exception_handler(RequestValidationError)
        async def on_invalid(_request: Request, exc: RequestValidationError) -> Response:
            problems = "; ".join(f"{e.get('loc', ('', '?'))[-1]}: {str(e.get('msg', '')).lower()}"
                                 for e in exc.errors())
            return _error(WebError("invalid_request", f"The request's parameters are not valid "
                                   f"({problems}); correct them and send it again."))

        @app.exception_handler(StarletteHTTPException)
        async def on_http(_request: Request, exc: StarletteHTTPException) -> Response:
            if _request.url.path.startswith("/console"):
                # A person's browser: a page, never JSON (a reload after a login, a link typed).
                return pages.not_here(exc.status_code, _methods_taken(app, _request))
            if exc.status_code == 404:
                return _error(WebError("not_found", "Nothing is served at this address; the "
                                       "API's routes are listed at /docs and /openapi.json."))
            if exc.status_code == 405:
                # Every method the address takes (each is a route of its own), as RFC 9110
                # asks of every 405.
                return Response(WebError("invalid_request", "This address does not take that "
                                         "method; see /docs for the ones it takes.").body(),
                                status_code=405, media_type="application/json",
                                headers={"Allow": _methods_taken(app, _request)})
            return Response(WebError("invalid_request", str(exc.detail)).body(),
                            status_code=exc.status_code, media_type="application/json")

        @app.exception_handler(ClientDisconnect)
        async def on_client_gone(request: Request, _exc: ClientDisconnect) -> Response:
            # Nobody is left to read an answer; the status is for the log and /metrics.
            log.info("client_disconnected", status=CLIENT_CLOSED, method=request.method,
                     route=getattr(request.scope.get("route"), "path", "unmatched"))
            return Response(status_code=CLIENT_CLOSED)

        @app.exception_handler(Exception)
        async def on_crash(_request: Request, exc: Exception) -> Response:
            if isinstance(exc, BodyTooLarge):
                # BodyLimit answers 413 and logs it; nothing failed here.
                return Response(status_code=413)
            log.error("request_failed", error=f"{type(exc).__name__}: {exc}")
            return Response(unavailable().body(), status_code=500, media_type="application/json")

        app.openapi = lambda: openapi_document(app)  # type: ignore[method-assign]
        return app

    async def _checks(self) -> dict[str, str]:
        checks = {"nats": "ok" if self.nc is not None and self.nc.is_connected else "not connected"}
        try:
            async with self.pool.connection() as conn:
                await conn.execute("SELECT 1")
            checks["postgres"] = "ok"
        except Exception:
            checks["postgres"] = "not answering"
        return checks


def _methods_taken(app: FastAPI, request: Request) -> str:
    taken: set[str] = set()
    for route in _every_route(app.router.routes):
        match, _ = route.matches(request.scope)
        if match is not Match.NONE:
            taken |= set(getattr(route, "methods", None) or ())
    return ", ".join(sorted(taken))


def _every_route(routes):
    """The routes themselves, also inside included routers (FastAPI keeps those whole)."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _every_route(inner.routes)
        else:
            yield route


class _McpGate:
    """MCP over HTTP answers only with a valid token, for that token's instance."""

    def __init__(self, app, web: WebApp) -> None:
        self.app = app
        self.web = web

    async def __call__(self, scope, receive, send) -> None:
        try:
            instance = await self.web.gate.instance_for(bearer(HTTPConnection(scope)))
        except WebError as exc:
            await _error(exc, {"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        # The body is read whole before the SDK sees it: a client gone in the middle of it is
        # a 499 like on every other route, never the SDK's error log and a 500.
        body = await _whole_body(receive)
        if body is None:
            log.info("client_disconnected", status=CLIENT_CLOSED, method=scope.get("method"),
                     route="/mcp")
            await Response(status_code=CLIENT_CLOSED)(scope, receive, send)
            return
        token = MCP_INSTANCE.set(instance)
        try:
            await self.app(scope, _replayed(body, receive), send)
        finally:
            MCP_INSTANCE.reset(token)


async def _whole_body(receive) -> list[dict] | None:
    """The request's body messages, or None when the client went away first (the body's
    size and time are bounded outside: limits.BodyLimit, intake.BodyDeadline)."""
    messages = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        messages.append(message)
        if not message.get("more_body", False):
            return messages


def _replayed(messages: list[dict], receive):
    pending = list(messages)

    async def replay() -> dict:
        return pending.pop(0) if pending else await receive()

    return replay


DESCRIPTION = (
    "Seedline's wire contract over HTTP, for one instance per bearer token "
    "(`Authorization: Bearer <token>`; an operator creates tokens with `seedline tokens "
    "create --instance <instance>`). Every error is `{\"ok\": false, \"error\": {\"code\", "
    "\"message\"}}`. The console is at /console and MCP over HTTP at /mcp."
)


def create_app(settings: Settings) -> WebApp:
    return WebApp(settings)


def published_files() -> dict[str, str]:
    """What `seedline docs --out docs` writes for the web process: its OpenAPI document."""
    return {OPENAPI_FILE: render(create_app(Settings()).fastapi.openapi())}
