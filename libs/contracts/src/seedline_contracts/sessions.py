"""Opening, relocating and stopping conversations (CONTRACT.md sections 3 and 4)."""

from __future__ import annotations

from typing import Literal

import msgspec

from . import subjects
from .channel import Api

Mode = Literal["resume", "fresh"]
Tone = Literal["info", "warning"]


class OpenRequest(msgspec.Struct):
    instance_id: str
    repo: str
    engine: str
    node_id: str
    request_id: str | None = None
    force_fresh: bool = False
    clean_slate: bool = False
    instruction: str | None = None
    # Set by the platform when a person's chat_user entry wakes a conversation:
    # the message is already in the timeline at this seq, so it is the launch's
    # instruction and the brief ends before it.
    wake_seq: int | None = None


class OpenAnswerRequest(msgspec.Struct, forbid_unknown_fields=True):
    """An open's answer asked for again: only an instance and the request_id of the
    open (`seedline open --request-id`). Any other field makes the body an open."""

    instance_id: str
    request_id: str


class Continuity(msgspec.Struct):
    mode: str
    resume_from: str | None
    reason_code: str
    reason: str


class BriefBudget(msgspec.Struct):
    """The budget a brief was composed with (CONTRACT.md 5)."""

    rows: int
    chars: int


class BriefSummary(msgspec.Struct):
    """A model's summary of entries a brief leaves out (optional, off by default).

    Recorded in seed_composed so the receipt says exactly what the engine was given and
    a replay shows the same summary instead of asking the model again.
    """

    model: str
    sha256: str
    text: str
    entries: int
    first_seq: int
    last_seq: int


class BriefStats(msgspec.Struct):
    rows: int
    chars: int
    omitted_rows: int
    until_seq: int
    sha256: str
    # Recorded in seed_composed so a replay composes with the same budget.
    budget: BriefBudget | None = None
    # In a reply or receipt: whether the engine was given this brief (the
    # runner's `seeded`). None in seed_composed, where nothing is known yet.
    spent: bool | None = None
    # Secret spans replaced by "[secret left out: <kind>]" (CONTRACT.md 5).
    redacted: int = 0


class NoticeBody(msgspec.Struct):
    chat: str
    console: str
    mcp: str
    tone: str


class Carried(msgspec.Struct):
    """What came along with a conversation that moved machines, as its new machine told:
    the tree (applied, or why not) and whether the engine's own record was placed."""

    from_node: str
    from_label: str
    files: int  # uncommitted files saved
    left_out: list[str]  # secret files left out, by path
    applied: bool
    reason: str | None  # why it was not applied (CONTRACT.md 6)
    sentence: str
    record_placed: bool


class OpenReply(msgspec.Struct):
    session_id: str
    node_id: str
    resumed: bool
    seeded: bool
    outcome: str
    continuity: Continuity
    brief: BriefStats | None
    notice: NoticeBody
    ok: bool = True
    # A working tree came along (CONTRACT.md 6); None when nothing was carried.
    carried: Carried | None = None
    # When no brief was offered, why, as recorded (CONTRACT.md 3.1): "force_fresh",
    # "clean_slate" or "no_entries" (the repo had none to brief with). None otherwise,
    # and in replies recorded before it was said.
    no_brief: str | None = None


class RelocateRequest(msgspec.Struct):
    session_id: str
    node_id: str
    request_id: str | None = None


class StopRequest(msgspec.Struct):
    session_id: str
    reason: str = "requested"


class StopReply(msgspec.Struct):
    """`stopped` is true when the conversation was live (CONTRACT.md 4.1)."""

    stopped: bool
    ok: bool = True


class BriefGetRequest(msgspec.Struct):
    session_id: str


class BriefGetReply(msgspec.Struct):
    text: str
    rows: int
    chars: int
    omitted_rows: int
    until_seq: int
    sha256: str
    ok: bool = True
    # Whether the engine was given it, as the receipt of the launch that offered it
    # says (CONTRACT.md 3.2); None where that is not known (the composer's own reply).
    spent: bool | None = None


class LiveConversation(msgspec.Struct):
    session_id: str
    instance_id: str
    repo: str
    node_id: str
    engine: str
    opened_at: str
    last_activity_at: str
    # The open's outcome as the machine finally had it (a resume_lost corrects it).
    outcome: str | None = None


class SessionsListRequest(msgspec.Struct):
    instance_id: str | None = None


class SessionsListReply(msgspec.Struct):
    conversations: list[LiveConversation]
    ok: bool = True


class StoppedIdleNotification(msgspec.Struct, tag_field="kind", tag="stopped_idle"):
    session_id: str
    text: str
    at: str


class RunnerOfflineNotification(msgspec.Struct, tag_field="kind", tag="runner_offline"):
    session_id: str
    node_id: str
    text: str
    at: str


class RunnerRestartedNotification(msgspec.Struct, tag_field="kind", tag="runner_restarted"):
    session_id: str
    node_id: str
    text: str
    at: str


class MachineRemovedNotification(msgspec.Struct, tag_field="kind", tag="machine_removed"):
    """An operator removed the machine a conversation was live on: it was stopped."""

    session_id: str
    node_id: str
    text: str
    at: str


class LaunchRefusedNotification(msgspec.Struct, tag_field="kind", tag="launch_refused"):
    """A person's message could not wake its conversation: the platform or the machine
    refused the launch (a machine too old for what it needs, say)."""

    session_id: str
    node_id: str
    text: str
    at: str


class NotWokenNotification(msgspec.Struct, tag_field="kind", tag="not_woken"):
    repo: str
    text: str
    at: str


class ResumeLostNotification(msgspec.Struct, tag_field="kind", tag="resume_lost"):
    """The engine could not continue its earlier conversation after all (CONTRACT.md 7)."""

    session_id: str
    text: str
    at: str


Notification = (
    ResumeLostNotification
    | StoppedIdleNotification
    | RunnerOfflineNotification
    | RunnerRestartedNotification
    | NotWokenNotification
    | MachineRemovedNotification
    | LaunchRefusedNotification
)


# -- its channels (seedline_contracts.channels gathers them) ----------------------

SESSIONS_OPEN = Api(
    "sessionsOpen", subjects.API_SESSIONS_OPEN, (OpenRequest,),
    "Open a conversation: resume or brief a fresh engine (3).",
    reply=OpenReply, title="open", not_json=True)

SESSIONS_RELOCATE = Api(
    "sessionsRelocate", subjects.API_SESSIONS_RELOCATE, (RelocateRequest,),
    "Move a conversation to another machine (4).",
    reply=OpenReply, title="relocation")

SESSIONS_STOP = Api(
    "sessionsStop", subjects.API_SESSIONS_STOP, (StopRequest,),
    "Stop a live conversation (4).", reply=StopReply, title="stop")

SESSIONS_LIST = Api(
    "sessionsList", subjects.API_SESSIONS_LIST, (SessionsListRequest,),
    "List live conversations, optionally of one instance.",
    reply=SessionsListReply, title="list")

BRIEFS_GET = Api(
    "briefsGet", subjects.API_BRIEFS_GET, (BriefGetRequest,),
    "The latest brief offered to a conversation, byte for byte (4).",
    reply=BriefGetReply, title="brief")
