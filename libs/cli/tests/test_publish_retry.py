"""`publish --file` rides out a NATS restart, counts exactly what NATS acknowledged, and when
it gives up says why (a full disk by name) and what to do."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from urllib.parse import urlparse

import pytest
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import ServiceUnavailableError

from seedline_cli.errors import OperationFailed
from seedline_core.notices import wording_violations
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
    assert ("Publishing stopped after 256 entries (the ones NATS acknowledged): NATS did not "
            "acknowledge the 4 entries") in message
    assert "nats://127.0.0.1:4222" in message and "seedline status" in message
    assert "publish the file again" in message
    assert "TimeoutError: )" not in message


class FillingJetStream:
    """Acknowledges the first ``room`` entries it is sent, then answers as a JetStream whose
    store is full; on ``fill`` it fills this test's disk too (a huge SEEDLINE_MIN_FREE_MB)."""

    def __init__(self, room: int, fill=None) -> None:
        self.room = room
        self.fill = fill
        self.sent = 0
        self._nc = SimpleNamespace(connected_url=urlparse("nats://127.0.0.1:4222"))

    async def publish_async(self, subject, payload, headers=None):
        future = asyncio.get_running_loop().create_future()
        self.sent += 1
        if self.sent <= self.room:
            future.set_result(SimpleNamespace(duplicate=False))
        else:
            if self.fill is not None:
                self.fill()
            future.set_exception(ServiceUnavailableError(
                code=503, err_code=10023, description="insufficient resources"))
        return future


class HalfDeaf:
    """The first time, acknowledges every other entry; then every entry."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self._nc = SimpleNamespace(connected_url=urlparse("nats://127.0.0.1:4222"))

    async def publish_async(self, subject, payload, headers=None):
        future = asyncio.get_running_loop().create_future()
        entry = headers["Nats-Msg-Id"]
        first_time = entry not in self.sent
        self.sent.append(entry)
        if first_time and int(entry) % 2:
            future.set_exception(NatsTimeout())
        else:
            future.set_result(SimpleNamespace(duplicate=False))
        return future


async def test_each_entry_counts_once_when_acknowledged_and_only_the_rest_is_sent_again():
    js, summary = HalfDeaf(), FileSummary()
    await _flush(js, _window(6), summary, patience=30)
    assert summary.published == 6
    assert js.sent == ["0", "1", "2", "3", "4", "5", "1", "3", "5"]


async def test_a_full_store_stops_publishing_with_the_count_of_what_was_stored(tmp_path,
                                                                               monkeypatch):
    monkeypatch.setenv("SEEDLINE_HOME", str(tmp_path / "not-here"))
    js, summary = FillingJetStream(room=16), FileSummary()
    with pytest.raises(OperationFailed) as failed:
        await _flush(js, _window(20), summary, patience=30)
    assert summary.published == 16 and failed.value.extra == {"published": 16}
    message = failed.value.message
    assert message.startswith("Publishing stopped after 16 entries (the ones NATS "
                              "acknowledged): JetStream refused the 4 entries sent: its store "
                              "has no room left")
    assert "the disk of the nats-server is full" in message and "did not answer" not in message
    assert not wording_violations(message)


async def test_a_disk_that_fills_while_publishing_is_named_with_the_count_so_far(tmp_path,
                                                                                 monkeypatch):
    monkeypatch.setenv("SEEDLINE_HOME", str(tmp_path))
    monkeypatch.setenv("SEEDLINE_MIN_FREE_MB", "0")
    js = FillingJetStream(
        room=16, fill=lambda: monkeypatch.setenv("SEEDLINE_MIN_FREE_MB", str(10**12)))
    summary = FileSummary()
    with pytest.raises(OperationFailed) as failed:
        await _flush(js, _window(20), summary, patience=30)
    assert summary.published == 16 and failed.value.code == "disk_full"
    message = failed.value.message
    assert message.startswith(f"Publishing stopped after 16 entries (the ones NATS "
                              f"acknowledged): The disk that holds {tmp_path.resolve()} is full")
    assert "Publish the file again once there is room" in message
