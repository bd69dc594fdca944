"""Each FastStream / fast_depends workaround, and whether upstream still needs it.

When the upstream test fails, a release resolves a handler's message on the event loop
by itself: `seedline_platform.faststream_workarounds` can go.
"""

from __future__ import annotations

import fast_depends.utils
import pytest
from faststream.nats import NatsBroker, TestNatsBroker
from faststream.nats.annotations import NatsMessage as UpstreamNatsMessage

from seedline_platform.faststream_workarounds import NatsMessage


@pytest.fixture
def thread_hops(monkeypatch):
    """Every callable fast_depends sends to a worker thread."""
    hops = []
    upstream = fast_depends.utils.run_in_threadpool

    async def counting(func, *args, **kwargs):
        hops.append(getattr(func, "__qualname__", repr(func)))
        return await upstream(func, *args, **kwargs)

    monkeypatch.setattr(fast_depends.utils, "run_in_threadpool", counting)
    return hops


async def _deliver_one(annotation) -> list[bytes]:
    broker = NatsBroker()
    seen: list[bytes] = []

    @broker.subscriber("work.in")
    async def handle(msg: annotation) -> None:  # type: ignore[valid-type]
        seen.append(msg.body)

    async with TestNatsBroker(broker) as test:
        await test.publish(b"payload", "work.in")
    return seen


async def test_upstream_still_resolves_a_handlers_message_in_a_worker_thread(thread_hops):
    assert await _deliver_one(UpstreamNatsMessage) == [b"payload"]
    assert thread_hops, "fast_depends now awaits Context in place: drop LoopContext"


async def test_the_platforms_handlers_get_their_message_without_a_thread(thread_hops):
    assert await _deliver_one(NatsMessage) == [b"payload"]
    assert thread_hops == []


def test_upstream_stop_still_drains_the_connection_after_the_subscribers():
    """When NatsBroker.stop no longer drains, stop_subscribers can be NatsBroker.stop."""
    import inspect

    from faststream._internal.broker import BrokerUsecase

    source = inspect.getsource(NatsBroker.stop)
    assert "drain()" in source and "super().stop(" in source
    assert issubclass(NatsBroker, BrokerUsecase)
