"""Insertion-ordered dicts a process keeps of its recent work, bounded to their newest
entries: what falls out is read again from where it is stored, when it is needed."""

from __future__ import annotations


def trim_oldest(kept: dict, limit: int) -> None:
    """Drop the oldest entries (the first inserted) until at most `limit` are left."""
    while len(kept) > limit:
        del kept[next(iter(kept))]
