"""The gateway's own tables: its fold of the lifecycle (CONTRACT.md 4.1), machine labels,
and each repo's most recent successful open (where a wake goes).

Built only from SEEDLINE_SESSIONS through seedline_core.lifecycle (so it can be dropped
and rebuilt), plus each live conversation's last activity from a person's messages (an
engine's output is read from the timeline when asked: activity.py). A port,
its Postgres adapter and a fake; both pass tests/test_gateway_state_contract.py.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Protocol

from seedline_contracts.times import parse_rfc3339
from seedline_core import lifecycle as lc

# (stream seq, session_id, lifecycle event, ...): seedline_platform.lifecycle_events.Step
Step = tuple


@dataclass(frozen=True)
class Held:
    """A conversation as the gateway holds it: its lifecycle and when it was last active."""

    conversation: lc.Conversation
    last_activity: datetime | None

    @property
    def session_id(self) -> str:
        return self.conversation.session_id

    @property
    def state(self) -> lc.State:
        return self.conversation.state

    @property
    def node_id(self) -> str | None:
        return self.conversation.node_id


# What a fold left of each conversation it touched, by session_id (None: none is held).
Folded = dict[str, "Held | None"]


@dataclass(frozen=True)
class RepoNow:
    """What a person's message finds of its repo, in one read: the newest conversation that
    is live or still opening, (node, engine) of the repo's most recent successful open
    or relocation (where a wake goes), and how far the fold had applied SEEDLINE_SESSIONS
    as read (its stored offset: what the read holds)."""

    current: Held | None
    last_open: tuple[str, str] | None
    applied: int = 0


@dataclass(frozen=True)
class AtLaunch:
    """What a launch reads of its repo, in one read: the conversation it launches, the
    SEEDLINE_SESSIONS seq of the repo's newest open (of any state, and of any but failed),
    and the repo's live conversations, oldest first."""

    held: Held | None
    newest_requested: int | None
    newest_not_failed: int | None
    live: list[Held]


class GatewayState(Protocol):
    async def apply_lifecycle(self, steps: Sequence[Step], last_seq: int) -> Folded:
        """Each conversation a step applied here touched, as the batch left it; one whose
        steps were already applied (a batch delivered again), or that requests alone left
        as it was, may be left out."""
        ...

    async def applied(self) -> int: ...

    async def held(self, session_id: str) -> Held | None: ...

    async def of_repo(self, instance_id: str, repo: str, session_ids: set[str]) -> list[Held]:
        """Those of `session_ids` that are conversations of the repo, in one read."""
        ...

    async def repo_now(self, instance_id: str, repo: str) -> RepoNow: ...

    async def all_live(self, instance_id: str | None = None) -> list[Held]: ...

    async def live_on(self, node_id: str, besides: Collection[str] = ()) -> list[Held]:
        """The live conversations on one machine, oldest first; none of `besides`."""
        ...

    async def hosting_nodes(self) -> set[str]:
        """The machines that host a live conversation."""
        ...

    async def at_launch(self, session_id: str, instance_id: str, repo: str) -> AtLaunch:
        """The conversation a launch launches and its repo as the launch is fenced
        against (a decision recorded before the repo's newest open is superseded,
        CONTRACT.md 4), in one read."""
        ...

    async def live_in_repo(self, instance_id: str, repo: str) -> list[Held]: ...

    async def touch(self, activity: dict[str, datetime]) -> None:
        """Newer activity of live conversations, by session_id."""
        ...

    async def idle_since(self, cutoff: datetime) -> list[Held]: ...

    async def record_machine(self, node_id: str, label: str) -> None: ...

    async def label(self, node_id: str) -> str | None: ...

    async def tell_not_woken(self, instance_id: str, repo: str, at: datetime, entry_id: str,
                             window: timedelta) -> bool:
        """Whether the message `entry_id` (dated `at`) tells the repo's people that nothing
        was woken: the first of a burst does, as does the same message delivered again (its
        notice carries the message's id, so the notices stream keeps it once); another
        message within `window` of the one that told does not. Kept where every copy of
        the gateway, and a gateway started again, finds it (CONTRACT.md 4)."""
        ...


def tells_not_woken(told: tuple[datetime, str] | None, at: datetime, entry_id: str,
                    window: timedelta) -> bool:
    """The pure rule of tell_not_woken, given what was told last: (at, entry_id)."""
    return told is None or told[1] == entry_id or abs(at - told[0]) >= window


def fold(current: Held | None, step: Step) -> Held | None:
    """The pure step both adapters take for each event."""
    event = step[2]
    before = current.conversation if current else None
    after = lc.apply(before, event)
    if after is None:
        return None
    activity = current.last_activity if current else None
    if after.confirmed_at and after.confirmed_at != (before.confirmed_at if before else None):
        confirmed = parse_rfc3339(after.confirmed_at)
        activity = max(activity, confirmed) if activity else confirmed
    return Held(after, activity)


def opened_where(step: Step, held: Held | None) -> tuple[str, str] | None:
    """(node, engine) when the step is a successful open or relocation, else None."""
    event = step[2]
    if held is None or held.state is not lc.State.LIVE:
        return None
    if isinstance(event, (lc.Opened, lc.Relocated)) and held.conversation.engine:
        return held.node_id, held.conversation.engine
    return None


class InMemoryGatewayState:
    def __init__(self) -> None:
        self.conversations: dict[str, Held] = {}
        self.last_opens: dict[tuple[str, str], tuple[str, str]] = {}
        self.labels: dict[str, str] = {}
        self.not_woken_told: dict[tuple[str, str], tuple[datetime, str]] = {}
        self._applied = 0

    async def apply_lifecycle(self, steps: Sequence[Step], last_seq: int) -> Folded:
        touched: Folded = {}
        for step in steps:
            seq, session_id = step[0], step[1]
            if seq <= self._applied:
                continue
            held = fold(self.conversations.get(session_id), step)
            touched[session_id] = held or self.conversations.get(session_id)
            if held is None:
                continue
            self.conversations[session_id] = held
            where = opened_where(step, held)
            if where:
                c = held.conversation
                self.last_opens[(c.instance_id, c.repo)] = where
        self._applied = max(self._applied, last_seq)
        return touched

    async def applied(self) -> int:
        return self._applied

    async def held(self, session_id: str) -> Held | None:
        return self.conversations.get(session_id)

    async def of_repo(self, instance_id: str, repo: str, session_ids: set[str]) -> list[Held]:
        return [h for s in sorted(session_ids) if (h := self.conversations.get(s)) is not None
                and (h.conversation.instance_id, h.conversation.repo) == (instance_id, repo)]

    async def repo_now(self, instance_id: str, repo: str) -> RepoNow:
        current = [
            h for h in self.conversations.values()
            if (h.conversation.instance_id, h.conversation.repo) == (instance_id, repo)
            and h.state in (lc.State.LIVE, lc.State.OPENING)
        ]
        return RepoNow(max(current, key=lambda h: h.conversation.created_seq, default=None),
                       self.last_opens.get((instance_id, repo)), self._applied)

    async def at_launch(self, session_id: str, instance_id: str, repo: str) -> AtLaunch:
        of_repo = [h for h in self.conversations.values()
                   if (h.conversation.instance_id, h.conversation.repo) == (instance_id, repo)]
        not_failed = [h for h in of_repo if h.state is not lc.State.FAILED]
        return AtLaunch(
            self.conversations.get(session_id),
            max((h.conversation.created_seq for h in of_repo), default=None),
            max((h.conversation.created_seq for h in not_failed), default=None),
            await self.live_in_repo(instance_id, repo))

    async def all_live(self, instance_id: str | None = None) -> list[Held]:
        live = [h for h in self.conversations.values() if h.state is lc.State.LIVE
                and instance_id in (None, h.conversation.instance_id)]
        return sorted(live, key=lambda h: h.conversation.created_seq)

    async def live_on(self, node_id: str, besides: Collection[str] = ()) -> list[Held]:
        return [h for h in await self.all_live()
                if h.node_id == node_id and h.session_id not in besides]

    async def hosting_nodes(self) -> set[str]:
        return {h.node_id for h in await self.all_live() if h.node_id}

    async def live_in_repo(self, instance_id: str, repo: str) -> list[Held]:
        return [h for h in await self.all_live(instance_id) if h.conversation.repo == repo]

    async def touch(self, activity: dict[str, datetime]) -> None:
        for session_id, at in activity.items():
            held = self.conversations.get(session_id)
            if held is not None and held.state is lc.State.LIVE:
                newer = max(at, held.last_activity) if held.last_activity else at
                self.conversations[session_id] = replace(held, last_activity=newer)

    async def idle_since(self, cutoff: datetime) -> list[Held]:
        return [h for h in await self.all_live() if h.last_activity and h.last_activity < cutoff]

    async def record_machine(self, node_id: str, label: str) -> None:
        self.labels[node_id] = label

    async def label(self, node_id: str) -> str | None:
        return self.labels.get(node_id)

    async def tell_not_woken(self, instance_id: str, repo: str, at: datetime, entry_id: str,
                             window: timedelta) -> bool:
        key = (instance_id, repo)
        if not tells_not_woken(self.not_woken_told.get(key), at, entry_id, window):
            return False
        self.not_woken_told[key] = (at, entry_id)
        return True
