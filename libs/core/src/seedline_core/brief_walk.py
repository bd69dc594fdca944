"""The budget walk both parts of a brief use: newest backwards, cut, and stop rather than skip.

A walk that kept looking further back for a smaller entry would give a record with a
hole in the middle and no text saying so; so an entry that does not fit is cut to the
room left (when that is at least MIN_PARTIAL_CHARS) and ends the walk, or ends it unkept.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass

from seedline_core.brief_layout import KeptEntry
from seedline_core.brief_rows import BriefRow, kept_entry, reference_to

MIN_PARTIAL_CHARS = 200


@dataclass(frozen=True)
class Limits:
    rows: int
    chars: int
    entry_chars: int


def walk(
    entries: Iterable[BriefRow],
    limits: Limits,
    fits: Callable[[list[KeptEntry]], bool],
    referenced: Container[int] = frozenset(),
) -> list[KeptEntry]:
    """The entries kept, newest first.

    `fits` says whether the kept entries so far (newest first) keep the overhead in
    bounds; the first entry is kept whatever it says. An entry whose seq is in
    `referenced` is shown elsewhere: it becomes a reference that costs no row and no
    characters of `limits`.
    """
    kept: list[KeptEntry] = []
    taken = 0
    room = limits.chars
    for entry in entries:
        last = False
        if entry.seq in referenced:
            candidate, keep = reference_to(entry), 0
        else:
            keep = min(len(entry.content), limits.entry_chars)
            if keep > room:
                if room < MIN_PARTIAL_CHARS:
                    break
                keep, last = room, True
            candidate = kept_entry(entry, keep)
        if kept and not fits([*kept, candidate]):
            break
        kept.append(candidate)
        if not candidate.reference:
            room -= keep
            taken += 1
        if last or taken == limits.rows:
            break
    return kept


def shown(kept: list[KeptEntry]) -> list[KeptEntry]:
    """Entries whose text the brief holds (not references)."""
    return [entry for entry in kept if not entry.reference]
