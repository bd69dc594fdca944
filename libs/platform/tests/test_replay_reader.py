"""The stream reader behind replay and newest_values, while a cluster has no metadata
leader (the consumer create times out or answers 503 for a few seconds), and while a
loaded server lets fetches run out with messages still held for the reader."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import NotFoundError, ServiceUnavailableError

from seedline_platform import replay
from seedline_platform.outage import StreamsUnavailable


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


class Stored:
    """A stream as a replay reads it: messages by seq, and a server that lets some fetches
    run out (asyncio's TimeoutError, as nats-py raises when its "no messages yet" answer
    comes at the deadline) while the stream still holds messages for the reader."""

    def __init__(self, seqs: list[int], late: int) -> None:
        self.seqs = seqs
        self.left = [Message(seq) for seq in seqs]
        self.late = late
        self.fetches = 0

    async def pull_subscribe(self, subject, stream, config):
        return self

    async def fetch(self, batch, timeout):
        self.fetches += 1
        if self.late:
            self.late -= 1
            raise asyncio.TimeoutError
        if not self.left:
            raise NatsTimeout
        taken, self.left = self.left[:batch], self.left[batch:]
        return taken

    async def get_msg(self, stream, seq, subject, next):
        found = [s for s in self.seqs if s >= seq]
        if not found:
            raise NotFoundError
        return SimpleNamespace(seq=found[0])

    async def unsubscribe(self) -> None:
        pass


class Message:
    def __init__(self, seq: int) -> None:
        self.metadata = SimpleNamespace(sequence=SimpleNamespace(stream=seq))


async def _replayed(js, start: int, end: int) -> list[int]:
    return [m.metadata.sequence.stream
            async for batch in replay.replay(js, "S", ">", start, end, batch=2) for m in batch]


async def test_a_replay_whose_fetch_runs_out_on_a_loaded_server_reads_the_whole_range():
    js = Stored([1, 2, 3, 4, 5], late=2)
    assert await _replayed(js, 1, 5) == [1, 2, 3, 4, 5]


async def test_a_replay_ends_at_a_gap_the_stream_holds_nothing_after():
    # 4 and 5 were deleted: the fetch after 3 runs out, and the stream holds nothing more.
    assert await _replayed(Stored([1, 2, 3], late=0), 1, 5) == [1, 2, 3]


async def test_a_server_that_keeps_holding_back_what_it_has_is_unavailable(monkeypatch):
    monkeypatch.setattr(replay, "FETCH_SECONDS", 0.01)
    js = Stored([1, 2], late=replay.FETCH_ATTEMPTS)
    with pytest.raises(StreamsUnavailable):
        await _replayed(js, 1, 2)
    assert js.fetches == replay.FETCH_ATTEMPTS
