"""An entry published through the web keeps its origin (CONTRACT.md 2.1, 1.2)."""

from __future__ import annotations

import pytest

from seedline_web import errors, publishing


def test_an_imported_entry_stays_imported_and_the_default_is_live():
    imported = publishing.to_entry(
        publishing.EntryBody("e", "apps/x", "c", "chat_user", "hi", origin="import"), "i")
    plain = publishing.to_entry(publishing.EntryBody("e", "apps/x", "c", "chat_user", "hi"), "i")

    assert imported.origin == "import"
    assert plain.origin is None  # the writer stores it as "live"


def test_another_origin_is_refused_naming_it():
    with pytest.raises(errors.WebError) as caught:
        publishing.to_entry(
            publishing.EntryBody("e", "apps/x", "c", "chat_user", "hi", origin="backfill"), "i")
    assert caught.value.code == "invalid_entry" and "origin" in caught.value.message
