"""The MCP server: the tools a person's agent uses to work with Seedline.

One server definition for both transports; `tenant_of()` says whose instance a call
is for (stdio: `--instance`; HTTP: the bearer token of that request). Each tool
returns plain text that follows CONTRACT.md 3.3, or an error result with the
sentence the platform wrote.
"""

# No `from __future__ import annotations` here: the SDK builds each tool's input schema
# from its parameters' annotations, which must be real objects, not strings.
import asyncio
import uuid
from typing import Any, Awaitable, Callable

import msgspec
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field, ValidationError
from typing_extensions import Annotated

from seedline_contracts import CONTRACT_VERSION
from seedline_contracts.sessions import OpenRequest
from seedline_contracts.timeline import MAX_CONTENT_CHARS, TimelineEntryIn
from seedline_contracts.times import now_text
from seedline_platform.logging import get_logger

from . import mcp_text
from .choosing import Previous, choose
from .disk_guard import refuse_new_work
from .errors import WebError
from .tenant import Tenant

log = get_logger(__name__)

TenantOf = Callable[[], Awaitable[Tenant]]
RECENT_ENTRIES = 200
SERVER_VERSION = CONTRACT_VERSION  # the wire contract this server speaks (CONTRACT.md)
JUST_OPENED_SECONDS = 10.0

INSTRUCTIONS = (
    "Seedline keeps the conversations of coding engines on each repo in a timeline that "
    "outlives any one process. Open or continue a conversation with open_conversation, send "
    "the person's next message with send_message, and read what happened with read_timeline. "
    "Every reply says plainly whether the engine continued its own earlier conversation or was "
    "given a brief reconstructed from the timeline."
)

Repo = Annotated[str, Field(description="The repo, as the timeline names it, e.g. "
                                        "apps/chess-academy.")]
ConversationId = Annotated[str, Field(description="The conversation's id, e.g. csess_21b8d1b9 "
                                                  "(list_conversations or read_timeline show it).")]


class ToolReply(BaseModel):
    """Every tool's structured result: the text a person reads, and the data behind it."""

    text: str = Field(description="What happened, in words for a person (CONTRACT.md 3.3).")
    data: dict[str, Any] = Field(default_factory=dict, description=(
        "The facts behind the text, in the contract's own field names: an open's reply, "
        "timeline entries, a brief and its receipt, conversations, machines or notices."))


Replied = Annotated[CallToolResult, ToolReply]


def _text(text: str, error: bool = False, data: Any = None) -> CallToolResult:
    structured = None if error else {"text": text, "data": msgspec.to_builtins(data or {})}
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=error,
                          structured_content=structured)


# What each tool does to the world, for clients that ask before calling (MCP tool hints).
READS = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                        open_world_hint=False)
STARTS = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False,
                         open_world_hint=True)
STOPS = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                        open_world_hint=True)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                         open_world_hint=True)


async def previous_on(tenant: Tenant, repo: str) -> Previous | None:
    """The repo's live conversation, else the newest one the platform opened on it."""
    live = await _live_on(tenant, repo)
    if live is not None:
        return live
    recent = tenant.backend.opened_here(tenant.instance_id, repo, within=JUST_OPENED_SECONDS)
    if recent is not None:
        # The gateway may list a conversation a moment after its open was answered.
        for _ in range(10):
            await asyncio.sleep(0.2)
            if (live := await _live_on(tenant, repo)) is not None:
                return live
        return Previous(recent.session_id, recent.node_id, recent.engine, live=False)
    page = await tenant.read(repo, limit=RECENT_ENTRIES)
    for session_id in dict.fromkeys(row.session_id for row in reversed(page.entries)):
        ran = (await tenant.backend.conversation(session_id)).conversation
        if (ran is not None and ran.instance_id == tenant.instance_id and ran.repo == repo
                and ran.node_id and ran.engine):
            # Where it last ran: a relocation's machine, when it moved after it opened.
            return Previous(session_id, ran.node_id, ran.engine, live=False)
    return None


async def _live_on(tenant: Tenant, repo: str) -> Previous | None:
    for c in await tenant.live():
        if c.repo == repo:
            return Previous(c.session_id, c.node_id, c.engine, live=True)
    return None


class _Server(MCPServer):
    """Arguments a tool cannot take are told in one sentence naming each and what it
    takes, like every other error, never as the SDK's validation report."""

    async def call_tool(self, name, arguments, context=None):  # type: ignore[override]
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            tool = self._tool_manager.get_tool(name)
            schema = tool.parameters if tool is not None else {}
            return _text(mcp_text.argument_problem(name, exc.__cause__.errors(), schema),
                         error=True)


def build_server(tenant_of: TenantOf) -> MCPServer:
    server = _Server("seedline", instructions=INSTRUCTIONS, log_level="WARNING",
                     version=SERVER_VERSION)

    def tool(description: str, hints: ToolAnnotations = READS):
        def register(fn):
            async def run(**kwargs) -> Replied:
                try:
                    if hints in (STARTS, WRITES):
                        refuse_new_work()  # before anything else: the full disk is the news
                    said = await fn(await tenant_of(), **kwargs)
                    text, data = said if isinstance(said, tuple) else (said, None)
                    return _text(text, data=data)
                except WebError as exc:
                    return _text(exc.message, error=True)
                except Exception:
                    log.exception("tool_failed", tool=fn.__name__)
                    return _text("Seedline could not do this right now; try again in a moment.",
                                 error=True)

            run.__name__ = fn.__name__
            # The tool's arguments are fn's (less the tenant); its result is always a ToolReply.
            run.__signature__ = _without_tenant(fn).replace(  # type: ignore[attr-defined]
                return_annotation=Replied)
            server.add_tool(run, name=fn.__name__, description=description,
                            annotations=hints)
            return fn

        return register

    @tool("Open or continue a conversation on a repo. Seedline decides whether the engine can "
          "continue its own earlier conversation there or starts fresh with a brief "
          "reconstructed from the timeline, and the reply says which, why, and what the brief "
          "held. If a conversation is already live on the repo, the new one takes over from it; "
          "to keep talking to the live one, use send_message instead.", STARTS)
    async def open_conversation(
        tenant: Tenant, repo: Repo,
        instruction: Annotated[str | None, Field(description="The person's message that starts "
                                                             "the conversation.")] = None,
        engine: Annotated[str | None, Field(description="Engine to run, e.g. claude; defaults "
                                                        "to the repo's last one.")] = None,
        machine: Annotated[str | None, Field(description="Machine (node id) to run on; "
                                                         "defaults to the repo's last one, or "
                                                         "the only machine online.")] = None,
        fresh: Annotated[bool, Field(description="Start a fresh engine conversation and give "
                                                 "it no brief: the engine starts with nothing of "
                                                 "the earlier work on the repo. Leave it false to "
                                                 "continue or be briefed.")] = False,
    ) -> str:
        online = await tenant.machines()
        previous = None if machine and engine else await previous_on(tenant, repo)
        node_id, chosen_engine = choose(machine, engine, previous, online)
        reply = await tenant.open(OpenRequest(
            instance_id=tenant.instance_id, repo=repo, engine=chosen_engine, node_id=node_id,
            instruction=instruction, force_fresh=fresh))
        return mcp_text.open_text(reply, repo, online), reply

    @tool("Send the person's next message to a repo. It reaches the conversation live there as "
          "its next turn; when none is live, it starts a new conversation on the machine and "
          "engine that last worked on the repo, where the engine continues its own earlier "
          "conversation or starts fresh with a brief, as decided then.", WRITES)
    async def send_message(
        tenant: Tenant, repo: Repo,
        text: Annotated[str, Field(description="The message, as the person wrote it.")],
    ) -> str:
        if not text.strip():
            raise WebError("invalid_request", mcp_text.EMPTY_MESSAGE)
        if len(text) > MAX_CONTENT_CHARS:
            raise WebError("invalid_request", mcp_text.MESSAGE_TOO_LONG.format(chars=len(text)))
        previous = await previous_on(tenant, repo)
        if previous is None:
            raise WebError("not_found", mcp_text.NEVER_WORKED_ON.format(repo=repo))
        online = await tenant.machines()
        where = mcp_text.machine_name(previous.node_id, online)
        reply = await tenant.append(TimelineEntryIn(
            entry_id=f"mcp-{uuid.uuid4().hex}", instance_id=tenant.instance_id, repo=repo,
            session_id=previous.session_id, kind="chat_user", content=text, at=now_text()))
        effect = (f"It reaches the live conversation {previous.session_id} on {where} as its "
                  "next turn." if previous.live else
                  f"No conversation was live on the repo, so it wakes one on {where} with the "
                  f"engine {previous.engine}; if that machine is offline, you will be told so.")
        return mcp_text.message_text(repo, reply.seq, effect), {
            "repo": repo, "seq": reply.seq, "conversation_id": previous.session_id,
            "live": previous.live}

    @tool("Read a repo's timeline, oldest first, with a line where each conversation begins.")
    async def read_timeline(
        tenant: Tenant, repo: Repo,
        conversation_id: Annotated[str | None, Field(description="Only this conversation.")]
        = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="How many of the newest "
                                                               "entries.")] = 50,
        before_seq: Annotated[int | None, Field(ge=1, description="Only entries older than "
                                                                  "this seq.")] = None,
    ) -> str:
        page = await tenant.read(repo, conversation_id, before_seq, limit)
        decisions = {}
        for session_id in dict.fromkeys(r.session_id for r in page.entries):
            record = await tenant.backend.conversation(session_id)
            latest = record.latest
            if (record.conversation is not None and latest is not None
                    and record.conversation.instance_id == tenant.instance_id
                    and latest.reply is not None):
                decisions[session_id] = latest.reply.notice.console
        return mcp_text.timeline_text(repo, page.entries, page.has_more, decisions), page

    @tool("Show the exact brief last offered to a conversation, with its receipt (entries, "
          "characters, what was left out, up to which seq, sha256) and whether the engine was "
          "given it.")
    async def show_brief(tenant: Tenant, conversation_id: ConversationId) -> str:
        brief, told = await tenant.brief_and_receipt(conversation_id)
        return mcp_text.brief_text(conversation_id, brief, told), brief

    @tool("List the conversations live on this instance, with their repo, engine and machine.")
    async def list_conversations(tenant: Tenant) -> str:
        live = await tenant.live()
        return mcp_text.conversations_text(live, await tenant.machines()), {"conversations": live}

    @tool("List the machines online for this instance: their labels, engines and what they "
          "host now.")
    async def list_machines(tenant: Tenant) -> str:
        machines = await tenant.machines()
        return mcp_text.machines_text(machines), {
            "machines": [m.__dict__ for m in machines]}

    @tool("Read the notices Seedline sent to this instance's people (a conversation stopped "
          "for idling, a machine gone offline or restarted, a message that woke nothing), "
          "oldest first. Notices are kept for 30 days, so this shows the ones sent while nobody "
          "was listening; each has an id to continue from.")
    async def read_notices(
        tenant: Tenant,
        after_id: Annotated[int | None, Field(ge=0, description="Only notices after this id "
                                                                "(the #N a notice was shown "
                                                                "with); omit for the oldest "
                                                                "kept.")] = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="At most this many.")] = 50,
    ) -> str:
        found, more = await tenant.notices(after_id, None, limit)
        return mcp_text.notices_text(found, more), {
            "notices": [{"id": n.seq, "notice": n.notice} for n in found], "has_more": more}

    @tool("Stop a live conversation. Its timeline stays; the next message to its repo starts "
          "a new conversation on the machine and engine that last worked on it.", STOPS)
    async def stop_conversation(tenant: Tenant, conversation_id: ConversationId) -> str:
        reply = await tenant.stop(conversation_id, "requested")
        return mcp_text.stop_text(conversation_id, reply.stopped), reply

    @tool("Move a conversation to another machine; it keeps its id. Its working tree and the "
          "engine's own record come along when they were saved; the reply says whether the "
          "engine there continued its own conversation or started fresh with a brief, and what "
          "came along.", STARTS)
    async def move_conversation(
        tenant: Tenant, conversation_id: ConversationId,
        machine: Annotated[str, Field(description="The machine (node id) to move it to.")],
    ) -> str:
        owner = await tenant.owner(conversation_id)
        reply = await tenant.relocate(conversation_id, machine)
        return mcp_text.open_text(reply, owner.repo, await tenant.machines(), moved=True), reply

    return server


def _without_tenant(fn):
    import inspect

    signature = inspect.signature(fn)
    return signature.replace(parameters=list(signature.parameters.values())[1:])
