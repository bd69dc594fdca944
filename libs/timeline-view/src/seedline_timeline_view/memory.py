"""An in-memory TimelineView for unit tests: the same answers as the Postgres adapter."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime

from seedline_contracts.timeline import TimelineEntry, TimelineRow
from seedline_contracts.times import parse_rfc3339

from .port import NO_UPPER_SEQ, AppliedEntry, ConversationBefore, RepoHead


def row_of(seq: int, e: TimelineEntry) -> TimelineRow:
    return TimelineRow(seq, e.entry_id, e.session_id, e.kind, e.content, e.at, e.engine,
                       e.truncated_from)


class InMemoryTimelineView:
    def __init__(self) -> None:
        self.entries: dict[int, TimelineEntry] = {}
        self._applied = 0
        self._changed = asyncio.Event()
        self.calls: list[tuple] = []

    def apply(self, seq: int, entry: TimelineEntry) -> None:
        """What the owner does: store an entry above every stored one."""
        if seq <= self._applied:
            return
        self.entries[seq] = entry
        self._applied = seq
        self._changed.set()

    def _repo(self, instance_id: str, repo: str) -> list[tuple[int, TimelineEntry]]:
        return sorted(
            (s, e) for s, e in self.entries.items()
            if e.instance_id == instance_id and e.repo == repo
        )

    async def repo_head(
        self, instance_id: str, repo: str, before_seq: int | None = None
    ) -> RepoHead | None:
        return self._head_below(instance_id, repo,
                                NO_UPPER_SEQ if before_seq is None else before_seq)

    def _head_below(self, instance_id: str, repo: str, upper: int) -> RepoHead | None:
        below = [s for s, _ in self._repo(instance_id, repo) if s < upper]
        return RepoHead(below[-1], len(below)) if below else None

    async def newest_first(
        self, instance_id: str, repo: str, until_seq: int, limit: int, kind: str | None = None
    ) -> list[TimelineRow]:
        self.calls.append(("newest_first", instance_id, repo, until_seq, limit, kind))
        rows = [
            row_of(s, e) for s, e in reversed(self._repo(instance_id, repo))
            if s <= until_seq and (kind is None or e.kind == kind)
        ]
        return rows[: max(0, limit)]

    async def count(self, instance_id: str, repo: str, until_seq: int, kind: str) -> int:
        return sum(1 for s, e in self._repo(instance_id, repo) if s <= until_seq and e.kind == kind)

    async def conversation_before(
        self, instance_id: str, repo: str, session_id: str, before_seq: int,
        turn_kinds: tuple[str, ...] = (), lookback: int = 0,
    ) -> ConversationBefore | None:
        return await self._before(instance_id, repo, session_id, before_seq, turn_kinds,
                                  lookback)

    async def _before(self, instance_id: str, repo: str, session_id: str, before_seq: int,
                      turn_kinds: tuple[str, ...], lookback: int) -> ConversationBefore | None:
        mine = [(s, e) for s, e in self._repo(instance_id, repo)
                if e.session_id == session_id and s < before_seq]
        if not mine:
            return None
        engines = [e.engine for _, e in mine if e.engine]
        turns = [row for kind in turn_kinds
                 for row in await self.newest_first(instance_id, repo, before_seq - 1, lookback,
                                                    kind)
                 if row.session_id == session_id]
        return ConversationBefore(max(parse_rfc3339(e.at) for _, e in mine), mine[-1][0],
                                  engines[-1] if engines else None,
                                  max(turns, key=lambda row: row.seq, default=None))

    async def entry(self, seq: int) -> TimelineEntry | None:
        return self.entries.get(seq)

    async def newest_at(
        self, conversations: Sequence[tuple[str, str, str]]
    ) -> dict[str, datetime]:
        newest = {}
        for instance_id, repo, session_id in conversations:
            mine = [e for _, e in self._repo(instance_id, repo) if e.session_id == session_id]
            if mine:
                newest[session_id] = parse_rfc3339(mine[-1].at)
        return newest

    async def applied_seq(self) -> int:
        return self._applied

    async def wait_until_applied(self, seq: int, timeout: float) -> bool:
        found = await self._wait_for(lambda: seq if seq in self.entries else None, timeout)
        return found is not None

    async def wait_for_entry(self, seq: int, timeout: float,
                             turn_kinds: tuple[str, ...] = (), lookback: int = 0) -> AppliedEntry:
        if not await self.wait_until_applied(seq, timeout):
            return AppliedEntry(False, None)
        entry = self.entries[seq]
        return AppliedEntry(True, entry, self._head_below(entry.instance_id, entry.repo, seq),
                            await self._before(entry.instance_id, entry.repo, entry.session_id,
                                               seq, turn_kinds, lookback))

    async def wait_until_stored(self, entry_id: str, timeout: float) -> int | None:
        return await self._wait_for(lambda: next(
            (s for s, e in self.entries.items() if e.entry_id == entry_id), None), timeout)

    async def _wait_for(self, seq_now, timeout: float) -> int | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (found := seq_now()) is None:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                return seq_now()
        return found
