"""Routing tables: what each service reacts to, how it consumes it, and what it may send.

Every service declares its subscriptions in one module of its own (`routes.py`), as a
tuple of `Route`s. The service subscribes from that table (`ServiceApp`), and the wire
documents are generated from the same tables: `docs/asyncapi.json` names the service
that receives each subject, and `docs/flows.md` draws each flow as a sequence of hops
(`seedline_devtools.flows`). Adding a subscription is one row here; nothing else lists it.

A handler is named by its path on the running app ("opening.open"): it is looked up when a
message arrives, so a table can be read (for the documents) without starting anything.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from enum import Enum


class Kind(str, Enum):
    """How a route consumes its subject."""

    # Request/reply: a queue group answers each request once.
    REQUEST = "request"
    # Core NATS messages with no reply, one copy each (a queue group).
    MESSAGE = "message"
    # Core NATS messages every copy receives (no queue group): the copy concerned acts.
    BROADCAST = "broadcast"
    # A durable JetStream consumer settled message by message (low rate).
    EVENT = "event"
    # A durable JetStream consumer applying ordered batches (projections, ingest).
    BATCH = "batch"
    # No subscription: work the service starts itself and runs until it stops (a sweep,
    # a watch); `subject` says what drives it.
    LOOP = "loop"


@dataclass(frozen=True)
class Route:
    kind: Kind
    subject: str  # a subject, or a filter with * and >
    handler: str  # path of the handler on the app, e.g. "opening.open"
    description: str
    stream: str | None = None  # EVENT and BATCH: the stream consumed
    durable: str | None = None  # EVENT and BATCH: the durable consumer's name
    # Further filter subjects of a BATCH consumer beside `subject`.
    also: tuple[str, ...] = ()
    # Where a message that keeps failing is parked (EVENT and BATCH).
    park: str | None = None
    # EVENT: seconds before an unacknowledged message is redelivered (None: 30).
    ack_wait: float | None = None
    # BATCH: a projection that skips what it applied, so a dead copy's batch is read
    # from the stream at once instead of waited for.
    idempotent: bool = False
    # What the handler may publish: session event types ("opened") or subjects.
    sends: tuple[str, ...] = ()
    # EVENT and BATCH: the contract type its payload is decoded into at the edge; an EVENT
    # handler is called with (event, msg), a BATCH handler with a consumer.Batch of such
    # pairs, and a payload that is not one is parked at once.
    message: type | None = None

    @property
    def filters(self) -> tuple[str, ...]:
        return (self.subject, *self.also)

    @property
    def acknowledged(self) -> str:
        """How deliveries are settled, as the documents say it."""
        return {Kind.EVENT: "explicit ack, redelivered up to max_deliver, then parked",
                Kind.BATCH: "one ack per batch after it is applied, then parked",
                }.get(self.kind, "none (core NATS)")


def message_name(kind: type) -> str:
    """A route's message type as the documents and parked reasons name it: a union of
    event types (SEEDLINE_SESSIONS' events) by its members."""
    name = getattr(kind, "__name__", None)
    return name or " | ".join(message_name(member) for member in typing.get_args(kind))


def resolve(app: object, path: str):
    """The handler `path` names on `app` ("opening.open": app.opening.open)."""
    target = app
    for part in path.split("."):
        target = getattr(target, part)
    return target
