"""`publish --file` rides out a NATS restart, and when it gives up says what to do."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from urllib.parse import urlparse

import pytest
from nats.errors import TimeoutError as NatsTimeout

from seedline_cli.errors import OperationFailed
from seedline_cli.publish_file import FileSummary, _flush


class FlakyJetStream:
    """Acknowledges nothing for its first ``silent`` windows, then everything."""

    def __init__(self, silent: int) -> None:
        self.silent = silent
        self.windows = 0
        self._nc = SimpleNamespace(connected_url=urlparse("nats://127.0.0.1:4222"))

    async def publish_async(self, subject, payload, headers=None):
        future = asyncio.get_running_loop().create_future()
        if self.windows < self.silent:
            future.set_exception(NatsTimeout())
        else:
            future.set_result(SimpleNamespace(duplicate=False))
        if headers and headers.get("last"):
            self.windows += 1
        return future


def _window(n: int) -> list:
    return [("seedline.ingest.timeline.x", b"{}", {"Nats-Msg-Id": str(i), "last": i == n - 1})
            for i in range(n)]


async def test_a_window_not_acknowledged_is_sent_again_until_it_is():
    js, summary = FlakyJetStream(silent=2), FileSummary()
    await _flush(js, _window(3), summary, patience=30)
    assert summary.published == 3 and js.windows == 3


async def test_giving_up_says_what_happened_and_what_to_do():
    js, summary = FlakyJetStream(silent=10**6), FileSummary(published=256)
    with pytest.raises(OperationFailed) as failed:
        await _flush(js, _window(4), summary, patience=0.2)
    message = str(failed.value)
    assert "Publishing stopped after 256 entries: NATS did not acknowledge the 4 entries" in message
    assert "nats://127.0.0.1:4222" in message and "seedline status" in message
    assert "publish the file again" in message
    assert "TimeoutError: )" not in message
