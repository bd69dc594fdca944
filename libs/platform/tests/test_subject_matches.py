"""The subject matching an ordered consumer uses to keep, of a range read from its
stream, only the messages of its own filters."""

from seedline_platform.subject_match import subject_matches


def test_wildcards_match_as_nats_does():
    assert subject_matches("seedline.ingest.timeline", "seedline.ingest.timeline")
    assert subject_matches("seedline.ingest.runner.m1", "seedline.ingest.runner.*")
    assert not subject_matches("seedline.ingest.runner.m1.x", "seedline.ingest.runner.*")
    assert subject_matches("seedline.ingest.p.3.a.b", "seedline.ingest.p.*.>")
    assert not subject_matches("seedline.ingest.p.3", "seedline.ingest.p.*.>")
    assert not subject_matches("seedline.ingest", "seedline.ingest.timeline")
    assert not subject_matches("seedline.ingest.timelines", "seedline.ingest.timeline")
