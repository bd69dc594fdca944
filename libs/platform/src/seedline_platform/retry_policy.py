"""The one retry-and-park policy of every stream consumer (DESIGN.md rules 2 and 4).

Both ways of consuming keep it: a message at a time (redelivery.py, the event routes,
where the server redelivers) and a batch at a time (consumer.py, where a failing batch is
tried again message by message, in place). In both:

- a message delivered more than `max_deliver` times never completed (it may be what kills
  the process): it is parked unhandled;
- an outage (Postgres or NATS away) is waited out, the lease extended, and never counted
  against the message;
- any other failure is tried again, and a message that failed on its `max_deliver`-th try
  is parked with the reason, so the ones behind it go on.

A payload that is not its route's type is parked at once (redelivery.Unreadable): no
redelivery makes it readable.
"""

from __future__ import annotations

import typing

from nats.aio.msg import Msg


def worn_out(msg: Msg, max_deliver: int) -> str | None:
    """Why a message is parked before it is handled, or None."""
    delivered = msg.metadata.num_delivered
    if delivered > max_deliver:
        return f"delivered {delivered} times without completing"
    return None


def outage_pause(waits: int) -> float:
    """Seconds before the next try through an outage, after `waits` waits: 0.2 s, then
    longer, at most 2 s (a database that restarts is back within seconds)."""
    return min(2.0, 0.2 * (1 + waits))


def gives_up(tries: int, max_deliver: int) -> bool:
    """Whether a message that failed on its `tries`-th try is parked now."""
    return tries >= max_deliver


def failure_reason(tries: int, exc: BaseException) -> str:
    """The reason a parked message carries (SEEDLINE_REJECTED)."""
    return f"failed {tries} times: {type(exc).__name__}: {exc}"[:500]


def unreadable_reason(kind: type, exc: Exception) -> str:
    """Why a payload that is not its route's type is parked: the type, or for a union of
    event types (a lifecycle fold's) how many it is none of, and what the decoder said."""
    members = typing.get_args(kind)
    what = f"any of its {len(members)} event types" if members else f"a {kind.__name__}"
    return f"not {what}: {exc}"[:500]
