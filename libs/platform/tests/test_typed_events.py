"""An EVENT route that names its message type: the handler is given the contract's type,
a payload that is not one is parked at once (no redelivery makes it readable), and a fault
of the handler keeps the retry policy it had."""

from __future__ import annotations

from seedline_contracts.codec import encode
from seedline_contracts.events import WakeRequested
from seedline_devtools.fakes import FakeMsg
from seedline_platform.redelivery import handle_with_redelivery, typed

WAKE = WakeRequested(session_id="csess_w", at="2026-12-01T10:00:00Z", instance_id="inst",
                     repo="apps/x", engine="claude", node_id="mac", wake_seq=3,
                     request_id="wake:e-3")


class Recorder:
    def __init__(self, fail: Exception | None = None) -> None:
        self.seen: list[tuple[object, int]] = []
        self.parked: list[str] = []
        self.fail = fail

    async def handle(self, event, msg) -> None:
        self.seen.append((event, msg.metadata.sequence.stream))
        if self.fail is not None:
            raise self.fail

    async def park(self, msg, reason: str) -> None:
        self.parked.append(reason)


async def test_the_handler_is_given_the_decoded_event_and_the_message():
    recorder = Recorder()
    msg = FakeMsg(encode(WAKE), stream_seq=42)
    await handle_with_redelivery(msg, typed(WakeRequested, recorder.handle), recorder.park, 5)
    assert recorder.seen == [(WAKE, 42)] and msg.settled == ["ack"] and recorder.parked == []


async def test_a_payload_that_is_not_the_type_is_parked_on_its_first_delivery():
    recorder = Recorder()
    msg = FakeMsg(b'{"session_id": "csess_w"}', num_delivered=1)
    await handle_with_redelivery(msg, typed(WakeRequested, recorder.handle), recorder.park, 5)
    assert recorder.seen == [] and msg.settled == ["ack"]
    [reason] = recorder.parked
    assert reason.startswith("not a WakeRequested:") and "missing required field" in reason


async def test_a_fault_of_the_handler_is_redelivered_before_it_is_parked():
    recorder = Recorder(fail=RuntimeError("a bug"))
    first = FakeMsg(encode(WAKE), num_delivered=1)
    await handle_with_redelivery(first, typed(WakeRequested, recorder.handle), recorder.park, 3)
    assert first.settled == ["nak"] and recorder.parked == []
    last = FakeMsg(encode(WAKE), num_delivered=3)
    await handle_with_redelivery(last, typed(WakeRequested, recorder.handle), recorder.park, 3)
    assert last.settled == ["ack"] and len(recorder.parked) == 1
