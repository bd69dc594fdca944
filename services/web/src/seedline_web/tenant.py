"""One instance's view of Seedline: the only way the HTTP API, the console and the
MCP tools reach the backend, so the tenancy rule lives in one place.

A caller names an instance only through its token (or `--instance` on stdio). A
conversation addressed by a bare id is looked up through the platform's own
events; one of another instance is answered exactly like one that does not exist.
New work (publishing, opening, moving) is refused while the disk is full (disk_guard.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

import msgspec

from seedline_contracts.runner import RunnerPresence
from seedline_contracts.sessions import (
    BriefGetReply,
    LiveConversation,
    OpenReply,
    OpenRequest,
    RelocateRequest,
    StopReply,
    StopRequest,
)
from seedline_contracts.timeline import (
    MAX_READ_LIMIT,
    AppendReply,
    RejectedInput,
    TimelineEntryIn,
    TimelineReadReply,
    TimelineReadRequest,
)
from seedline_contracts.tokens import name_problem
from seedline_core.notices import no_brief_text, no_such_conversation_text

from seedline_platform.notices import StoredNotice

from .backend import Backend, Owner
from .disk_guard import new_work, refuse_new_work
from .errors import WebError


def check_name(field: str, value: object) -> str:
    problem = name_problem(value)
    if problem is not None:
        raise WebError("invalid_request", f"The {field} cannot be used as a name: it {problem}.")
    return value  # type: ignore[return-value]


@dataclass(frozen=True)
class Machine:
    """A machine online, as one instance may see it."""

    node_id: str
    label: str
    engines: list[str]
    live: list[str]  # this instance's conversations it hosts now
    serves_every_instance: bool


class Tenant:
    def __init__(self, backend: Backend, instance_id: str) -> None:
        self.backend = backend
        self.instance_id = check_name("instance", instance_id)

    # -- conversations addressed by id ---------------------------------------------------

    async def owner(self, session_id: str) -> Owner:
        """The conversation's repo, when it is this instance's; else not_found."""
        if name_problem(session_id) is not None:
            raise WebError("not_found", no_such_conversation_text(session_id[:80]))
        owner = await self.backend.owner(session_id)
        if owner is None or owner.instance_id != self.instance_id:
            raise WebError("not_found", no_such_conversation_text(session_id))
        return owner

    async def relocate(self, session_id: str, node_id: str) -> OpenReply:
        await self.owner(session_id)
        check_name("machine", node_id)
        refuse_new_work()
        try:
            return await new_work(
                self.backend.relocate(RelocateRequest(session_id=session_id, node_id=node_id)))
        except WebError as exc:
            if exc.code != "invalid_request":
                raise
            # The request was checked above; what the resolver refuses is the conversation's
            # state now (a newer one on its repo, one still opening): a conflict, not a
            # malformed request (CONTRACT.md 4.1).
            raise WebError(exc.code, exc.message, status=409) from None

    async def stop(self, session_id: str, reason: str = "requested") -> StopReply:
        await self.owner(session_id)
        return await self.backend.stop(StopRequest(session_id=session_id, reason=reason[:200]))

    async def brief(self, session_id: str) -> BriefGetReply:
        """The brief last offered, with whether the engine was given it (CONTRACT.md 3.2)."""
        return (await self.brief_and_receipt(session_id))[0]

    async def brief_and_receipt(self, session_id: str) -> tuple[BriefGetReply, str | None]:
        """That, and the receipt in words: given, or why not (None: no open offered it).
        When no brief was offered, why, as recorded (CONTRACT.md 3.1), told apart from an
        unknown id."""
        await self.owner(session_id)
        try:
            brief = await self.backend.brief(session_id)
        except WebError as exc:
            if exc.code != "not_found":
                raise
            record = await self.backend.conversation(session_id)
            raise WebError("not_found", no_brief_text(session_id, record.why_no_brief())) from None
        record = await self.backend.conversation(session_id)
        spent = record.brief_given(brief.sha256)
        return msgspec.structs.replace(brief, spent=spent), record.brief_receipt(brief.sha256)

    # -- the instance's repos --------------------------------------------------------------

    async def open(self, request: OpenRequest) -> OpenReply:
        if request.instance_id != self.instance_id:
            raise WebError("not_permitted", "A conversation can be opened only on this instance.")
        check_name("repo", request.repo)
        check_name("machine", request.node_id)
        refuse_new_work()
        return await new_work(self.backend.open(request))

    async def read(self, repo: str, session_id: str | None = None, before_seq: int | None = None,
                   limit: int = 100, min_seq: int | None = None) -> TimelineReadReply:
        check_name("repo", repo)
        if session_id is not None:
            check_name("conversation", session_id)
        return await self.backend.read(TimelineReadRequest(
            instance_id=self.instance_id, repo=repo, session_id=session_id,
            before_seq=before_seq, limit=max(1, min(limit, MAX_READ_LIMIT)), min_seq=min_seq))

    async def append(self, entry: TimelineEntryIn) -> AppendReply:
        self._own(entry)
        refuse_new_work()
        return await new_work(self.backend.append(entry))

    async def publish(self, entries: list[TimelineEntryIn]) -> list[tuple[int, bool]]:
        for entry in entries:
            self._own(entry)
        refuse_new_work()
        return await new_work(self.backend.publish(entries))

    def _own(self, entry: TimelineEntryIn) -> None:
        if entry.instance_id != self.instance_id:
            raise WebError("not_permitted", "Entries can be published only to this instance.")

    async def live(self) -> list[LiveConversation]:
        reply = await self.backend.live(self.instance_id)
        # The filter is the gateway's; checked again so a wider reply never leaks.
        return [c for c in reply.conversations if c.instance_id == self.instance_id]

    async def rejected(self, limit: int = 50, scan: int = 2000) -> list[tuple[int, RejectedInput]]:
        """This instance's newest rejected entries, among the last `scan` records."""
        found = [(seq, r) for seq, r in await self.backend.rejected(scan)
                 if names_instance(r, self.instance_id)]
        return found[-limit:]

    async def notices(self, after_seq: int | None = None, since: datetime | None = None,
                      limit: int = 100) -> tuple[list[StoredNotice], bool]:
        """The instance's stored notices, oldest first (CONTRACT.md 1)."""
        return await self.backend.notices(self.instance_id, after_seq, since, limit)

    async def repos(self) -> dict[str, int]:
        """The instance's repos with how many entries each has."""
        return await self.backend.repo_counts(self.instance_id)

    async def machines(self) -> list[Machine]:
        """Machines online that serve this instance, hosting only what it may see."""
        presences = await self.backend.machines()
        mine = {c.session_id for c in await self.live()}
        return [machine_view(p, mine) for p in presences
                if not p.instances or self.instance_id in p.instances]


def names_instance(record: RejectedInput, instance_id: str) -> bool:
    """A rejected record belongs to the instance its raw JSON names; anything else
    (not JSON, no instance) is for operators only."""
    if record.raw_encoding != "utf-8":
        return False
    try:
        raw = json.loads(record.raw)
    except (ValueError, RecursionError):
        return False
    return isinstance(raw, dict) and raw.get("instance_id") == instance_id


def machine_view(presence: RunnerPresence, visible: set[str]) -> Machine:
    return Machine(
        node_id=presence.node_id, label=presence.label, engines=list(presence.engines),
        live=[s for s in (presence.live or []) if s in visible],
        serves_every_instance=not presence.instances,
    )
