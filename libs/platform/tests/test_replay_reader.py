"""The stream reader behind replay and newest_values, while a cluster has no metadata
leader (the consumer create times out or answers 503 for a few seconds), and while a
loaded server lets fetches run out with messages still held for the reader."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import ServiceUnavailableError

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
    """What a reader is given of a stream: messages by seq, and a server that lets some
    fetches run out (asyncio's TimeoutError, as nats-py raises when its "no messages yet"
    answer comes at the deadline) while it still holds messages for the reader."""

    def __init__(self, seqs: list[int], late: int, sent_already: bool = False) -> None:
        self.left = [Message(seq, len(seqs) - n - 1) for n, seq in enumerate(seqs)]
        self.late = late
        self.fetches = 0
        # The server counts what is left as delivered: on its way to the reader.
        self.sent_already = sent_already

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

    async def consumer_info(self):
        if self.sent_already:
            return SimpleNamespace(num_pending=0, delivered=SimpleNamespace(
                stream_seq=self.left[-1].metadata.sequence.stream if self.left else 0))
        return SimpleNamespace(num_pending=len(self.left),
                               delivered=SimpleNamespace(stream_seq=0))

    async def unsubscribe(self) -> None:
        pass


class Message:
    def __init__(self, seq: int, pending: int) -> None:
        self.metadata = SimpleNamespace(sequence=SimpleNamespace(stream=seq),
                                        num_pending=pending)


async def _replayed(js, start: int, end: int) -> list[int]:
    return [m.metadata.sequence.stream
            async for batch in replay.replay(js, "S", ">", start, end, batch=2) for m in batch]


async def test_a_replay_whose_fetch_runs_out_on_a_loaded_server_reads_the_whole_range():
    js = Stored([1, 2, 3, 4, 5], late=2)
    assert await _replayed(js, 1, 5) == [1, 2, 3, 4, 5]


async def test_a_replay_waits_for_what_the_server_sent_before_the_fetch_ran_out():
    js = Stored([1, 2, 3], late=1, sent_already=True)
    assert await _replayed(js, 1, 3) == [1, 2, 3]


async def test_a_replay_ends_at_a_gap_the_stream_holds_nothing_after():
    # 4 and 5 were deleted: the consumer has nothing left to deliver.
    assert await _replayed(Stored([1, 2, 3], late=0), 1, 5) == [1, 2, 3]


async def test_what_is_stored_is_read_whole_when_a_fetch_runs_out():
    js = Stored([1, 2, 3], late=1)
    assert [m.metadata.sequence.stream async for m in replay.stored(js, "S", ">")] == [1, 2, 3]


async def test_a_server_that_keeps_holding_back_what_it_has_is_unavailable():
    js = Stored([1, 2], late=replay.FETCH_ATTEMPTS)
    with pytest.raises(StreamsUnavailable):
        await _replayed(js, 1, 2)
    assert js.fetches == replay.FETCH_ATTEMPTS
