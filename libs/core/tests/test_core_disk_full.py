"""The full-disk sentence every surface gives: the folder, what is free, what is needed."""

from __future__ import annotations

from seedline_core.disk_full import DiskFull, disk_full, room_again_text, size_text
from seedline_core.notices import wording_violations


def test_a_disk_below_what_is_needed_is_full_and_the_sentence_says_how_much_more():
    state = disk_full("/srv/seedline", free=3_400_000, needed=100_000_000)
    assert state == DiskFull("/srv/seedline", 3_400_000, 100_000_000)
    text = state.message()
    assert text.startswith("The disk that holds /srv/seedline is full: 3 MB free")
    assert "needs at least 100 MB free there" in text and "(96 MB more)" in text
    assert "carries on by itself once there is room" in text
    assert not wording_violations(text) and not wording_violations(room_again_text("/x"))


def test_a_disk_with_what_is_needed_is_not_full():
    assert disk_full("/srv/seedline", free=100_000_000, needed=100_000_000) is None


def test_sizes_read_as_a_person_reads_df():
    assert [size_text(n) for n in (0, 999, 4_096, 12_345_678, 999_999_999, 80_794_000_000)] == [
        "0 bytes", "999 bytes", "4 kB", "12 MB", "999 MB", "80.8 GB"]
