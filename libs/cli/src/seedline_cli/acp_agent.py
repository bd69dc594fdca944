"""Seedline as an Agent Client Protocol agent: an editor's conversations, on Seedline.

``session/new`` opens a conversation on the repo of the editor's folder, on the machine
and engine of the repo's live conversation (else ``--node``/``--engine``), and the first
update is the open's notice: what the continuity decision was, in the words of 3.3.
``session/prompt`` publishes the person's message as a ``chat_user`` entry; the platform
delivers it to the repo's live conversation as a turn, or wakes one. What the engine then
records in the repo's timeline streams back as updates as it is recorded (``acp_timeline``:
text, and tool calls as they start and finish with their output), pushed, not polled
(``acp_follow``). The turn is answered ``end_turn`` when the engine's own end of that turn
is recorded (``acp_turn``), never after a quiet time: a tool that runs for minutes keeps
the turn open, and what it printed and the engine's answer reach the editor first.
``session/load`` replays a conversation's timeline, whatever engine or machine wrote it,
then continues it like any other. ``session/cancel`` is the only thing that cuts a turn
short: it stops the repo's live conversation, which ends the engine and every process it
started, and the turn answers ``cancelled`` (the next message wakes it again, with a brief).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Awaitable
from typing import Any, TypeVar

from acp import (
    PROTOCOL_VERSION,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    update_agent_message_text,
)
from acp.schema import AgentCapabilities, Implementation
from msgspec import to_builtins
from nats.aio.client import Client

from seedline_client import SeedlineClient
from seedline_contracts.sessions import OpenRequest, SessionsListRequest, StopRequest
from seedline_contracts.timeline import TimelineEntryIn, TimelineReadRequest
from seedline_contracts.times import now_text

from .acp_follow import PlatformFeed, until_told
from .acp_timeline import UpdateWriter, repo_for
from .acp_turn import TurnWatch
from .errors import CliError
from .nats_client import answered

# stdout carries the protocol, so this logs through logging (stderr), never structlog.
log = logging.getLogger(__name__)
T = TypeVar("T")

_PAGE = 500
# A turn reads the timeline again after this long without a push, in case one was lost
# on a reconnect. Reading never ends a turn by itself.
_RECHECK_SECONDS = 5.0


@dataclass(frozen=True)
class AcpOptions:
    instance: str
    repo: str | None = None
    repos_dir: Path | None = None
    node: str | None = None
    engine: str | None = None


@dataclass
class _Conversation:
    session_id: str
    repo: str
    # The newest repo seq already shown to the editor.
    cursor: int
    writer: UpdateWriter = field(default_factory=UpdateWriter)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    # A cancel is under way: the stop it asks for is the editor's, not an unanswered turn.
    cancelling: bool = False
    # Set by every push that may concern this conversation's turn.
    wake: asyncio.Event = field(default_factory=asyncio.Event)


class SeedlineAcpAgent:
    def __init__(self, nc: Client, options: AcpOptions) -> None:
        self._nc = nc
        self._api = SeedlineClient(nc, timeout=15.0)
        self._options = options
        self._conversations: dict[str, _Conversation] = {}
        self._client: Any = None
        self._feed = PlatformFeed(nc, options.instance)

    def on_connect(self, conn: Any) -> None:
        self._client = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=True),
            agent_info=Implementation(name="seedline", title="Seedline", version="1"),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        repo = repo_for(cwd, self._options.repo, self._options.repos_dir)
        node, engine = await self._machine_and_engine(repo)
        reply = await self._call(self._api.open(
            OpenRequest(self._options.instance, repo, engine, node,
                        request_id=f"acp-{uuid.uuid4().hex}"),
            timeout=60.0,
        ))
        session_id = reply.session_id
        await self._feed.follow(repo)
        conversation = _Conversation(session_id, repo, cursor=await self._newest_seq(repo))
        self._conversations[session_id] = conversation
        notice = reply.notice.chat or "The conversation is open."
        # Sent once the editor has the reply naming the conversation it belongs to.
        asyncio.get_running_loop().call_soon(
            lambda: asyncio.ensure_future(self._say(session_id, notice))
        )
        return NewSessionResponse(session_id=session_id)

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> LoadSessionResponse:
        repo = repo_for(cwd, self._options.repo, self._options.repos_dir)
        entries = await self._entries(repo, session_id=session_id, after=0)
        if not entries:
            raise RequestError.resource_not_found(f"{repo} conversation {session_id}")
        await self._feed.follow(repo)
        conversation = _Conversation(session_id, repo, cursor=await self._newest_seq(repo))
        for entry in entries:
            for update in conversation.writer.updates(entry):
                await self._client.session_update(session_id=session_id, update=update)
        self._conversations[session_id] = conversation
        return LoadSessionResponse()

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        conversation = self._conversations.get(session_id)
        if conversation is None:
            raise RequestError.invalid_params({"sessionId": "unknown here; open or load it first"})
        text = "".join(getattr(block, "text", "") or "" for block in prompt)
        conversation.cancelled.clear()
        conversation.cancelling = False
        live = await self._live_of(conversation.repo)
        # Events can come before the append's reply names the message's seq: kept until then.
        heard: list[tuple[str, Any]] = []

        def hear(kind: str, payload: Any) -> None:
            if kind != "timeline" or payload == conversation.repo:
                heard.append((kind, payload))
                conversation.wake.set()

        stop_listening = self._feed.listen(hear)
        try:
            appended = await self._call(self._api.append(TimelineEntryIn(
                f"acp-{uuid.uuid4().hex}", self._options.instance, conversation.repo,
                session_id, "chat_user", text, at=now_text())))
            conversation.writer.updates({"seq": appended.seq, "kind": "chat_user",
                                         "content": text})
            watch = TurnWatch(appended.seq, answering=live["session_id"] if live else None)
            return PromptResponse(
                stop_reason=await self._follow_turn(conversation, watch, heard))
        finally:
            stop_listening()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        conversation = self._conversations.get(session_id)
        if conversation is None:
            return
        conversation.cancelling = True
        try:
            live = await self._live_of(conversation.repo)
            if live is not None:
                await self._call(self._api.stop(
                    StopRequest(live["session_id"], "stopped from the editor")))
        finally:
            # The turn answers "cancelled" only once the engine has been stopped.
            conversation.cancelled.set()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def _follow_turn(
        self, conversation: _Conversation, watch: TurnWatch, heard: list[tuple[str, Any]]
    ) -> str:
        """Stream the repo's new entries until the turn answering the message is over.

        Everything after the cursor is shown, what came since the last turn first: a
        cursor never jumps past an entry the editor has not been shown."""
        while True:
            conversation.wake.clear()
            told, heard[:] = list(heard), []
            for kind, payload in told:
                if kind == "event":
                    watch.event(payload)
                elif kind == "notice":
                    watch.notice(payload, conversation.repo)
            if conversation.cancelled.is_set():
                await self._send(conversation, conversation.writer.close_open_tools("failed"))
                return "cancelled"
            entries = await self._new_entries(conversation)
            for entry in entries:
                conversation.cursor = max(conversation.cursor, int(entry["seq"]))
                if entry.get("kind") != "chat_user":
                    # A person's message, this one or one from elsewhere, is not the answer.
                    await self._send(conversation, conversation.writer.updates(entry))
                if watch.read(entry):
                    await self._send(conversation,
                                     conversation.writer.close_open_tools("completed"))
                    return "end_turn"
            if watch.unanswered is not None and not conversation.cancelling:
                await self._send(conversation, conversation.writer.close_open_tools("failed"))
                await self._say(conversation.session_id, watch.unanswered)
                return "end_turn"
            await until_told(conversation.wake, conversation.cancelled, _RECHECK_SECONDS)

    async def _new_entries(self, conversation: _Conversation) -> list[dict[str, Any]]:
        """What the repo recorded after the cursor, up to at least the newest push."""
        newest = self._feed.newest(conversation.repo)
        if newest > conversation.cursor:
            try:
                return await self._entries(conversation.repo, after=conversation.cursor,
                                           min_seq=newest)
            except RequestError:
                # Reads had not reached it in the API's wait (a loaded machine): what is
                # readable now, and the rest with the next push or recheck.
                log.info("timeline reads lag behind seq %s", newest)
        return await self._entries(conversation.repo, after=conversation.cursor)

    async def _send(self, conversation: _Conversation, updates: list[Any]) -> None:
        for update in updates:
            await self._client.session_update(session_id=conversation.session_id, update=update)

    async def _entries(
        self, repo: str, *, after: int, session_id: str | None = None,
        min_seq: int | None = None,
    ) -> list[dict[str, Any]]:
        """Entries of the repo (or of one conversation) with seq above ``after``, oldest
        first; with ``min_seq``, once the timeline's reads have reached that seq."""
        found: list[dict[str, Any]] = []
        before: int | None = None
        while True:
            page = await self._call(self._api.read(TimelineReadRequest(
                self._options.instance, repo, session_id, before, _PAGE, min_seq=min_seq)))
            found = [to_builtins(row) for row in page.entries if row.seq > after] + found
            if not page.has_more or not page.entries or page.entries[0].seq <= after + 1:
                return found
            before = page.entries[0].seq

    async def _newest_seq(self, repo: str) -> int:
        page = await self._call(self._api.read(
            TimelineReadRequest(self._options.instance, repo, limit=1)))
        return page.entries[-1].seq if page.entries else 0

    async def _live_of(self, repo: str) -> dict[str, Any] | None:
        listed = await self._call(self._api.live(SessionsListRequest(self._options.instance)))
        return next((to_builtins(c) for c in listed.conversations if c.repo == repo), None)

    async def _machine_and_engine(self, repo: str) -> tuple[str, str]:
        live = await self._live_of(repo)
        node = self._options.node or (live or {}).get("node_id")
        engine = self._options.engine or (live or {}).get("engine")
        if not node or not engine:
            raise RequestError.invalid_params(
                {"message": f"{repo} has no live conversation to take the machine and engine "
                            "from: start seedline acp with --node and --engine."}
            )
        return node, engine

    async def _say(self, session_id: str, text: str) -> None:
        try:
            await self._client.session_update(
                session_id=session_id, update=update_agent_message_text(text)
            )
        except Exception:
            log.warning("a notice for %s could not be sent", session_id)

    async def _call(self, request: Awaitable[T]) -> T:
        """A request's reply; a failure is the editor's error, in the CLI's words."""
        try:
            return await answered(request)
        except CliError as error:
            raise RequestError.internal_error({"message": str(error)}) from error
