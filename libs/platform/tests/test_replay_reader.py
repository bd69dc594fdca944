"""The stream reader behind replay and newest_values, while a cluster has no metadata
leader: the consumer create times out or answers 503 for a few seconds."""

from __future__ import annotations

import pytest
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import ServiceUnavailableError

from seedline_platform import replay


class ElectingCluster:
    """Answers the first `failures` consumer creates as a leaderless cluster does."""

    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.creates = 0

    async def pull_subscribe(self, subject, stream, config):
        self.creates += 1
        if self.failures:
            raise self.failures.pop(0)
        return Subscription()


class Subscription:
    unsubscribed = False

    async def unsubscribe(self) -> None:
        self.unsubscribed = True


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay, "CREATE_BACKOFF", 0.0)


async def test_a_reader_is_made_once_the_cluster_answers_again():
    js = ElectingCluster([NatsTimeout(), ServiceUnavailableError()])
    async with replay.reader(js, "SEEDLINE_TIMELINE", "seedline.timeline.>") as sub:
        assert isinstance(sub, Subscription)
    assert js.creates == 3 and sub.unsubscribed


async def test_a_cluster_that_stays_leaderless_is_the_callers_error():
    js = ElectingCluster([NatsTimeout() for _ in range(replay.CREATE_ATTEMPTS)])
    with pytest.raises(NatsTimeout):
        async with replay.reader(js, "SEEDLINE_TIMELINE", "seedline.timeline.>"):
            pass
    assert js.creates == replay.CREATE_ATTEMPTS


async def test_other_errors_are_not_tried_again():
    js = ElectingCluster([ValueError("bad config")])
    with pytest.raises(ValueError):
        async with replay.reader(js, "SEEDLINE_TIMELINE", "seedline.timeline.>"):
            pass
    assert js.creates == 1
