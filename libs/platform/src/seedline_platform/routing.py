"""Routing tables: what each service reacts to, how it consumes it, and what it may send.

Every service declares its subscriptions in one module of its own (`routes.py`), as a
tuple of `Route`s. That table drives the wire (DESIGN.md rule 11):
- the service subscribes from it (`ServiceApp`), decoding each message into the row's
  contract type at the edge and encoding what a request's handler returns;
- a handler may send only what its row declares: every publish, notice and machine
  request is checked against the row of the handler it happens under (sending.py);
- the NATS permissions of every service, the client's directory of who answers what,
  the AsyncAPI document and docs/flows.md are generated from the tables.

A handler is named by reference: a function defined on a part's class (`Launcher.launch`),
bound to the part the service's `bootstrap` built when the service starts. So a table
can be read (for the documents and permissions) without starting anything, and
go-to-definition follows every route.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

from seedline_contracts import subjects
from seedline_contracts.channels import Api, Channel, event_tag



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


# What a row may send: a channel of the contract, or a session event type (recorded on
# seedline.session.<session>.<type>).
Sendable = Channel | type


def sent_subject(sent: Sendable) -> str:
    """What a row's `sends` names, as a subject filter."""
    if isinstance(sent, Channel):
        return sent.filter
    return subjects.session_event_filter(event_tag(sent))


def sent_name(sent: Sendable) -> str:
    """How the documents name what is sent: an event by its type, a channel by its address."""
    return sent.address if isinstance(sent, Channel) else event_tag(sent)


@dataclass(frozen=True)
class Route:
    kind: Kind
    subject: str  # a subject, or a filter with * and >
    handler: Callable  # a function of a part's class, e.g. Launcher.launch
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
    # What the handler may send: channels and session event types.
    sends: tuple[Sendable, ...] = ()
    # The contract type the payload is decoded into at the edge: an EVENT handler is
    # called with (message, msg), a BATCH handler with a consumer.Batch of such pairs, a
    # MESSAGE or BROADCAST handler with (message, msg); a payload that is not one is
    # parked (or, with no stream, logged and dropped).
    message: type | None = None
    # REQUEST: the API answered; its handler takes the request type and returns the reply
    # type or an ErrorReply.
    api: Api | None = None
    # REQUEST: reads a body into the request when the API's own type is not enough (an open
    # may also be a bare request for an earlier answer).
    decode: Callable[[bytes], object] | None = None
    # MESSAGE and BROADCAST: how many messages are handled at once; 1, one at a time in
    # arrival order. More where one message's handler may wait (on a fold, say) and the
    # others do not depend on it.
    workers: int = 1

    @classmethod
    def request(cls, api: Api, handler: Callable, *, sends: tuple[Sendable, ...] = (),
                decode: Callable[[bytes], object] | None = None,
                description: str | None = None) -> Route:
        return cls(Kind.REQUEST, api.address, handler, description or api.description,
                   sends=sends, api=api, decode=decode)

    @classmethod
    def event(cls, event_type: type, handler: Callable, *, durable: str, description: str,
              sends: tuple[Sendable, ...] = (), ack_wait: float | None = None) -> Route:
        """A durable consumer of one session event type, handed each as its contract type;
        what keeps failing is parked in SEEDLINE_REJECTED."""
        return cls(Kind.EVENT, subjects.session_event_filter(event_tag(event_type)), handler,
                   description, stream=subjects.SESSIONS_STREAM, durable=durable,
                   park=subjects.REJECTED_SESSIONS, ack_wait=ack_wait, sends=sends,
                   message=event_type)

    @classmethod
    def fold(cls, event_types: tuple[type, ...], handler: Callable, *, durable: str,
             message: type, description: str) -> Route:
        """A projection's durable batch consumer of these session event types only, in
        stream order, each handed as `message`; it skips what it applied (idempotent)."""
        first, *also = (subjects.session_event_filter(event_tag(t)) for t in event_types)
        return cls(Kind.BATCH, first, handler, description, stream=subjects.SESSIONS_STREAM,
                   durable=durable, also=tuple(also), park=subjects.REJECTED_SESSIONS,
                   idempotent=True, message=message)

    @property
    def filters(self) -> tuple[str, ...]:
        return (self.subject, *self.also)

    @property
    def send_filters(self) -> tuple[str, ...]:
        """Every subject this row may publish or request on, its parking place included."""
        return (*(sent_subject(s) for s in self.sends), *((self.park,) if self.park else ()))

    @property
    def handler_name(self) -> str:
        """The handler as the documents name it: Class.method."""
        return self.handler.__qualname__

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


def bind(handler: Callable, parts: Iterable[object]) -> Callable:
    """The handler bound to the one part whose class defines it."""
    owners = [part for part in parts
              if any(vars(cls).get(handler.__name__) is handler for cls in type(part).__mro__)]
    if len(owners) != 1:
        raise LookupError(f"{handler.__qualname__} is defined by {len(owners)} of the parts "
                          "bootstrap built; a route's handler needs exactly one")
    return getattr(owners[0], handler.__name__)
