"""The project's own word for "something this needs is away": an Outage.

The adapters turn their driver's errors into it, once, where they call the driver: the
Postgres pool (pg.OutagePool) for every query, the JetStream publisher for every publish,
the streams' readers for where a stream ends and a conversation's newest event.
A handler never looks at a driver's exception; the consumers and the request edge (the
platform's, not the handler's) wait an outage out or answer `unavailable`, and treat any
other error as a fault of the message.
"""

from __future__ import annotations

import asyncio

import nats.errors
import nats.js.errors


class Outage(Exception):
    """Retry later, never park: what is needed is away, the message is fine."""


class DatabaseUnavailable(Outage):
    """Postgres cannot be reached, or ended the statement because it is going away."""


class StreamsUnavailable(Outage):
    """NATS or a stream cannot take the message now (a restart, a leader election)."""


# A stream electing a new leader (a cluster losing a server) answers a publish with no
# responders or a 503: the message is fine, the stream is away.
NATS_AWAY: tuple[type[BaseException], ...] = (
    nats.errors.ConnectionClosedError, nats.errors.TimeoutError, asyncio.TimeoutError,
    nats.errors.NoRespondersError, nats.errors.ConnectionReconnectingError,
    nats.js.errors.NoStreamResponseError, nats.js.errors.ServiceUnavailableError,
)


def is_outage(exc: BaseException) -> bool:
    """For the platform's own loops that call nats-py directly (fetching, acking): an
    Outage an adapter raised, or the driver's word for the same."""
    return isinstance(exc, Outage) or isinstance(exc, NATS_AWAY)
