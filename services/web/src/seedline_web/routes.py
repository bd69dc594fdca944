"""The web process's routing table: what it consumes, runs and may send on NATS.

It answers people over HTTP (the API, the console, MCP), not NATS requests: what those
pages and tools ask of the platform goes out through the typed client, and the entries
people write go to ingest. Its own NATS work is the console's projection of every open
and the erasures it follows.
"""

from __future__ import annotations

from seedline_contracts import channels, subjects
from seedline_contracts.events import SessionEvent
from seedline_platform import erasure
from seedline_platform.routing import Kind, Route
from seedline_platform.settings import Settings

from .opens import PROJECTION, OpensProjection
from .serving import HttpServer

# What the HTTP API, the console and MCP ask of the platform (forgetting an instance is
# an operator's, never a token's).
ASKS = (channels.TIMELINE_APPEND, channels.TIMELINE_READ, channels.SESSIONS_OPEN,
        channels.SESSIONS_RELOCATE, channels.SESSIONS_STOP, channels.SESSIONS_LIST,
        channels.BRIEFS_GET)


def routes(settings: Settings) -> tuple[Route, ...]:
    return (
        Route(Kind.LOOP, "HTTP: the API, the console and MCP", HttpServer.serve,
              description="Answers people over HTTP; entries they write go to ingest.",
              sends=(channels.INGEST_OF_INSTANCE, *ASKS)),
        Route(Kind.BATCH, subjects.SESSION_EVENTS_ALL, OpensProjection.apply,
              stream=subjects.SESSIONS_STREAM, durable=PROJECTION, idempotent=True,
              message=SessionEvent,
              description="Every open as it was decided and answered, for the console."),
        erasure.route("its tokens, console logins and opens"),
    )
