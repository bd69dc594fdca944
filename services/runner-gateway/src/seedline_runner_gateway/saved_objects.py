"""What the object store keeps of saved checkouts (CONTRACT.md 6): each conversation's
newest save and each repo's newest three; older objects are deleted as a new save is
recorded.

An object's name says whose it is (`<instance>/<session_id>/<n>`, its engine record
`...-record` beside it) and `n` grows with every launch of the repo (the launch's
fence), so the newest is the highest; which repo a conversation is of, the gateway's
fold says.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from nats.js import JetStreamContext

from seedline_contracts import subjects
from seedline_platform.logging import get_logger
from seedline_platform.saved_objects import delete_objects, object_names

log = get_logger(__name__)

KEEP_PER_REPO = 3


class SavedObjectsKept(Protocol):
    async def keep_newest(self, instance_id: str, repo: str, session_id: str) -> None:
        """Delete what is older than a conversation's newest save and a repo's newest
        three (the repo of the conversation just saved)."""
        ...


def _parse(name: str) -> tuple[str, int] | None:
    """(session_id, n) of an object's name, None for a name of another form."""
    parts = name.split("/")
    if len(parts) != 3:
        return None
    number = parts[2].removesuffix("-record")
    return (parts[1], int(number)) if number.isdigit() else None


def to_delete(names: list[str], repo_of: dict[str, str], repo: str) -> list[str]:
    """Of one instance's objects, those older than their conversation's newest save, and
    those of `repo` past its newest three conversations' saves."""
    newest: dict[str, int] = {}
    for name in names:
        parsed = _parse(name)
        if parsed is not None:
            newest[parsed[0]] = max(parsed[1], newest.get(parsed[0], -1))
    in_repo = sorted((n, s) for s, n in newest.items() if repo_of.get(s) == repo)[::-1]
    dropped = {session for _, session in in_repo[KEEP_PER_REPO:]}
    out = []
    for name in names:
        parsed = _parse(name)
        if parsed is not None and (parsed[0] in dropped or parsed[1] < newest[parsed[0]]):
            out.append(name)
    return out


class ObjectStoreKept:
    def __init__(self, js: JetStreamContext,
                 repo_of: Callable[[str], Awaitable[str | None]]) -> None:
        self._js = js
        self._repo_of = repo_of

    async def keep_newest(self, instance_id: str, repo: str, session_id: str) -> None:
        try:
            names = await object_names(self._js, subjects.worktree_prefix(instance_id))
            sessions = {parsed[0] for name in names if (parsed := _parse(name))}
            repo_of = {s: r for s in sessions if (r := await self._repo_of(s)) is not None}
            repo_of[session_id] = repo
            await delete_objects(self._js, to_delete(names, repo_of, repo))
        except Exception as error:  # NATS away: trimmed at the next save
            log.warning("saved_objects_not_trimmed", error=str(error))


class KeptInMemory:
    """For tests: what the gateway asked to trim."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, str]] = []

    async def keep_newest(self, instance_id: str, repo: str, session_id: str) -> None:
        self.asked.append((instance_id, repo, session_id))
