"""A handler sends only what its row declares: anything else is an error at the send, in
tests as in the service (the server would refuse it too: its permissions are the rows)."""

from __future__ import annotations

import pytest

from seedline_contracts import channels, subjects
from seedline_contracts.events import Opened, Stopped
from seedline_platform.publishing import RecordingPublisher
from seedline_platform.routing import Kind, Route, bind
from seedline_platform.sending import UndeclaredSend, sending_as


class Part:
    async def handle(self, event, msg) -> None: ...


def row(*sends) -> Route:
    return Route(Kind.EVENT, subjects.session_event_filter("seed_composed"), Part.handle,
                 "a row", park=subjects.REJECTED_SESSIONS, sends=sends)


async def test_what_the_row_declares_goes_out_and_anything_else_is_refused():
    publisher = RecordingPublisher()
    with sending_as(row(Opened, channels.NOTIFY)):
        await publisher.publish([(subjects.session_event_subject("csess_1", "opened"), b"{}",
                                  None), (subjects.notify_subject("inst"), b"{}", None),
                                 (subjects.REJECTED_SESSIONS, b"{}", None)])  # its parking
        with pytest.raises(UndeclaredSend, match="Part.handle sent on seedline.session.csess_1"
                                                 ".stopped"):
            await publisher.publish([(subjects.session_event_subject("csess_1", "stopped"),
                                      b"{}", None)])
    assert len(publisher.messages) == 3


async def test_outside_any_row_nothing_is_checked_and_a_row_ends_with_its_block():
    publisher = RecordingPublisher()
    with sending_as(row(Stopped)):
        pass
    await publisher.publish([(subjects.session_event_subject("csess_1", "opened"), b"{}", None)])
    assert len(publisher.messages) == 1


def test_a_handler_is_bound_to_the_one_part_that_defines_it():
    part = Part()
    assert bind(Part.handle, [object(), part]) == part.handle
    with pytest.raises(LookupError, match="Part.handle is defined by 0"):
        bind(Part.handle, [object()])
    with pytest.raises(LookupError, match="defined by 2"):
        bind(Part.handle, [Part(), Part()])
