"""Metrics labels come from the routing table, so their number is bounded by it."""

from __future__ import annotations

import pytest

from seedline_platform.metrics_labels import OTHER, route_label
from seedline_platform.subject_match import subject_matches


@pytest.mark.parametrize(("pattern", "subject", "matches"), [
    ("seedline.session.*.opened", "seedline.session.csess_1.opened", True),
    ("seedline.session.*.opened", "seedline.session.csess_1.stopped", False),
    ("seedline.session.*.opened", "seedline.session.opened", False),
    ("seedline.session.>", "seedline.session.csess_1.opened", True),
    ("seedline.session.>", "seedline.session", False),
    ("seedline.api.sessions.open", "seedline.api.sessions.open", True),
    ("seedline.api.sessions.open", "seedline.api.sessions.open.x", False),
])
def test_subject_matching_is_nats_matching(pattern, subject, matches):
    assert subject_matches(subject, pattern) is matches


def test_a_subject_is_labelled_by_the_first_route_that_takes_it():
    patterns = ["seedline.api.sessions.open", "seedline.session.*.wake_requested",
                "seedline.session.>"]
    assert route_label("seedline.session.csess_9.wake_requested", patterns) == patterns[1]
    assert route_label("seedline.session.csess_9.opened", patterns) == patterns[2]
    assert route_label("_INBOX.continuity-resolver.x1y2", patterns) == OTHER
