"""Where Seedline works around FastStream (0.7), in one module.

Each says what it works around; `libs/platform/tests/test_faststream_workarounds.py`
fails when a release no longer needs one, so it can go.
"""

from __future__ import annotations

from faststream._internal.broker import BrokerUsecase
from faststream.nats import NatsBroker


async def stop_subscribers(broker: NatsBroker) -> None:
    """Stop a broker's subscribers without draining its connection.

    `NatsBroker.stop` stops the subscribers, then drains the connection, and a drain waits
    out its timeout on pull subscriptions whose fetches were cancelled (seconds at every
    stop). The subscribers' part is the base class's `stop`; the service closes the
    connection itself, so unacknowledged work is redelivered to whichever copy runs next."""
    await BrokerUsecase.stop(broker)
