"""Each FastStream workaround, and whether upstream still needs it: when a test here
fails, a release no longer needs the workaround it names, and it can go."""

from __future__ import annotations

from faststream.nats import NatsBroker


def test_upstream_stop_still_drains_the_connection_after_the_subscribers():
    """When NatsBroker.stop no longer drains, stop_subscribers can be NatsBroker.stop."""
    import inspect

    from faststream._internal.broker import BrokerUsecase

    source = inspect.getsource(NatsBroker.stop)
    assert "drain()" in source and "super().stop(" in source
    assert issubclass(NatsBroker, BrokerUsecase)
