"""Where Seedline works around FastStream (0.7) and fast_depends (3.0), in one module.

Each says what it works around; `libs/platform/tests/test_faststream_workarounds.py`
fails when a release no longer needs one, so it can go.
"""

from __future__ import annotations

from typing import Annotated, Any

from faststream._internal.broker import BrokerUsecase
from faststream.context import Context  # the class; `faststream.Context` builds one
from faststream.nats import NatsBroker
from faststream.nats.message import NatsMessage as _NatsMessage


class LoopContext(Context):
    """FastStream's `Context`, resolved on the event loop.

    fast_depends resolves a handler's custom fields with `run_async`, which sends a sync
    `use` to a worker thread (`anyio.to_thread.run_sync`). `Context.use` is sync and only
    reads a context variable, so every message of every handler that takes its message
    (`NatsMessage` is `Context("message")`) went to a thread and back: measured, a
    tenth of the gateway's busy time per open, and the wait for a free core twice on each
    hop. Declared async, it is awaited in place."""

    async def use(self, /, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        return Context.use(self, **kwargs)


# What each handler of the routing table takes: the message, resolved without a thread.
NatsMessage = Annotated[_NatsMessage, LoopContext("message")]


async def stop_subscribers(broker: NatsBroker) -> None:
    """Stop a broker's subscribers without draining its connection.

    `NatsBroker.stop` stops the subscribers, then drains the connection, and a drain waits
    out its timeout on pull subscriptions whose fetches were cancelled (seconds at every
    stop). The subscribers' part is the base class's `stop`; the service closes the
    connection itself, so unacknowledged work is redelivered to whichever copy runs next."""
    await BrokerUsecase.stop(broker)
