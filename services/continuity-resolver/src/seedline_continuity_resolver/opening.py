"""seedline.api.sessions.open and .relocate: decide, record, wait for the machine.

The handler loads what the decision needs, calls the pure core, records
`open_requested` and `continuity_decided`, and waits for the gateway's `opened`
or `open_failed`. The composer and the gateway react to the events; nothing
here talks to a machine.
"""

from __future__ import annotations

import asyncio
import secrets
from datetime import datetime, timezone

import msgspec
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from psycopg_pool import AsyncConnectionPool

from seedline_contracts import subjects
from seedline_contracts.codec import decode, encode
from seedline_contracts.errors import error_reply
from seedline_contracts.events import ContinuityDecided, LaunchPlan, OpenRequested
from seedline_contracts.runner import RunnerPresence
from seedline_contracts.sessions import Continuity, OpenRequest, RelocateRequest
from seedline_contracts.timeline import MAX_CONTENT_CHARS, MAX_ENGINE_CHARS, MAX_ENTRY_ID_CHARS
from seedline_contracts.tokens import has_control_characters, is_valid_token
from seedline_core import decision as core
from seedline_core.notices import error_message
from seedline_platform import pg, timeline_table
from seedline_platform.clock import format_utc, utc_now
from seedline_platform.logging import get_logger
from seedline_platform.natsio import publish_window
from seedline_platform.replay import last_seq
from seedline_platform.settings import Settings

from .pending import PendingOpens
from .projection import SESSIONS_PROJECTION

log = get_logger(__name__)


def new_session_id() -> str:
    return "csess_" + secrets.token_hex(8)


def _invalid(field: str) -> bytes:
    return encode(error_reply("invalid_request", error_message("invalid_request", field=field)))


def validate_open(request: OpenRequest) -> str | None:
    """The first invalid field, or None."""
    for name in ("instance_id", "repo", "node_id"):
        value = getattr(request, name)
        if not is_valid_token(value) or has_control_characters(value):
            return name
    if not 1 <= len(request.engine) <= MAX_ENGINE_CHARS:
        return "engine"
    if request.request_id is not None and not 1 <= len(request.request_id) <= MAX_ENTRY_ID_CHARS:
        return "request_id"
    if request.instruction is not None and len(request.instruction) > MAX_CONTENT_CHARS:
        return "instruction"
    if request.wake_seq is not None and request.wake_seq < 1:
        return "wake_seq"
    return None


class Opener:
    def __init__(
        self,
        nc: Client,
        js: JetStreamContext,
        pool: AsyncConnectionPool,
        settings: Settings,
        pending: PendingOpens,
    ) -> None:
        self._nc = nc
        self._js = js
        self._pool = pool
        self._settings = settings
        self._pending = pending
        self._decision_settings = core.DecisionSettings(
            resume_window=settings.resume_window, stateless_engines=settings.stateless_engines
        )

    # -- open -------------------------------------------------------------------------

    async def open(self, msg: Msg) -> bytes:
        try:
            request = decode(msg.data, OpenRequest)
        except msgspec.ValidationError as exc:
            return encode(error_reply("invalid_request", f"The open request is not valid: {exc}."))
        except msgspec.DecodeError:
            return encode(error_reply("not_json", error_message("not_json")))
        bad = validate_open(request)
        if bad:
            return _invalid(bad)

        session_id = new_session_id()
        if request.request_id is not None:
            first = await self._claim_request(request.instance_id, request.request_id, session_id)
            if first is not None:
                return await self._await_reply(first, already_claimed=True)

        now = utc_now()
        previous = await self._previous(request.instance_id, request.repo)
        runner_stateless = await self._runner_stateless_engines(request.node_id)
        decided = core.decide(
            core.OpenRequest(
                engine=request.engine,
                node_id=request.node_id,
                force_fresh=request.force_fresh,
                runner_stateless_engines=runner_stateless,
            ),
            previous,
            now,
            self._decision_settings,
        )
        instruction = request.instruction
        if request.wake_seq is not None:
            # The gateway saw the message on the stream; the projection may be a
            # moment behind it, and both the brief and the instruction come from there.
            await pg.wait_for_offset(self._pool, timeline_table.PROJECTION, request.wake_seq, 5.0)
        async with self._pool.connection() as conn:
            head = await timeline_table.repo_head(conn, request.instance_id, request.repo, request.wake_seq)
            if request.wake_seq is not None:
                instruction = await self._entry_content(conn, request.wake_seq)
        if instruction is not None and request.wake_seq is None:
            await self._record_instruction(request, session_id, instruction, now)

        plan = LaunchPlan(
            instance_id=request.instance_id,
            repo=request.repo,
            engine=request.engine,
            node_id=request.node_id,
            continuity=Continuity(**decided.to_continuity()),
            resume_key=decided.resume_key,
            instruction=instruction,
            clean_slate=request.clean_slate,
            request_id=request.request_id,
            wake_seq=request.wake_seq,
        )
        at = format_utc(now)
        requested = OpenRequested(
            session_id=session_id, at=at, instance_id=request.instance_id, repo=request.repo,
            engine=request.engine, node_id=request.node_id, request_id=request.request_id,
            force_fresh=request.force_fresh, clean_slate=request.clean_slate,
            has_instruction=instruction is not None, wake_seq=request.wake_seq,
        )
        decision_event = self._decided(session_id, at, plan, decided.seed, head)
        log.info("continuity_decided", session_id=session_id, request_id=request.request_id,
                 reason_code=plan.continuity.reason_code)
        return await self._record_and_wait(session_id, [requested, decision_event])

    # -- relocate ---------------------------------------------------------------------

    async def relocate(self, msg: Msg) -> bytes:
        try:
            request = decode(msg.data, RelocateRequest)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            return encode(error_reply("invalid_request", f"The relocation request is not valid: {exc}."))
        if not is_valid_token(request.node_id) or has_control_characters(request.node_id):
            return _invalid("node_id")
        if not is_valid_token(request.session_id) or has_control_characters(request.session_id):
            return _invalid("session_id")
        row = await self._conversation(request.session_id)
        if row is None:
            # An open answered a moment ago may not be projected yet: catch up once.
            last = await last_seq(self._js, subjects.SESSIONS_STREAM)
            await pg.wait_for_offset(self._pool, SESSIONS_PROJECTION, last, 5.0)
            row = await self._conversation(request.session_id)
        if row is None:
            return encode(error_reply("not_found", error_message("not_found", what="conversation")))
        instance_id, repo, engine, old_node = row
        async with self._pool.connection() as conn:
            head = await timeline_table.repo_head(conn, instance_id, repo)
        decided = core.relocation_decision(old_node, request.node_id)
        plan = LaunchPlan(
            instance_id=instance_id,
            repo=repo,
            engine=engine or "unknown",
            node_id=request.node_id,
            continuity=Continuity(**decided.to_continuity()),
            resume_key=None,
            instruction=None,
            clean_slate=False,
            request_id=request.request_id,
            relocation_from=old_node,
        )
        event = self._decided(request.session_id, format_utc(utc_now()), plan, decided.seed, head)
        return await self._record_and_wait(request.session_id, [event])

    # -- shared -----------------------------------------------------------------------

    async def _conversation(self, session_id: str) -> tuple | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT instance_id, repo, COALESCE(open_engine, entry_engine), node_id"
                " FROM conversations WHERE session_id = %s",
                (session_id,),
            )
            return await cur.fetchone()

    @staticmethod
    def _decided(session_id, at, plan, seed, head) -> ContinuityDecided:
        return ContinuityDecided(
            session_id=session_id,
            at=at,
            continuity=plan.continuity,
            seed_source=seed.value if seed else None,
            until_seq=head.seq if head else None,
            entries_upto=head.entries if head else 0,
            plan=plan,
        )

    async def _record_and_wait(self, session_id: str, events: list) -> bytes:
        future = self._pending.expect(session_id)
        try:
            await publish_window(self._js, [
                (subjects.session_event_subject(session_id, e.__struct_config__.tag), encode(e), None)
                for e in events
            ])
            return await asyncio.wait_for(future, self._settings.open_timeout_seconds)
        except asyncio.TimeoutError:
            stored = await self._stored_reply_for(session_id)
            return stored or encode(error_reply("timeout", error_message("timeout")))
        finally:
            self._pending.forget(session_id)

    async def _claim_request(self, instance_id: str, request_id: str, session_id: str) -> str | None:
        """Claim a request_id; when it was claimed before, the first claim's session id."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "INSERT INTO open_requests (instance_id, request_id, session_id) VALUES (%s, %s, %s)"
                " ON CONFLICT DO NOTHING RETURNING session_id",
                (instance_id, request_id, session_id),
            )
            if await cur.fetchone():
                return None
            cur = await conn.execute(
                "SELECT session_id FROM open_requests WHERE instance_id = %s AND request_id = %s",
                (instance_id, request_id),
            )
            return (await cur.fetchone())[0]

    async def _await_reply(self, session_id: str, already_claimed: bool) -> bytes:
        """The first request's reply, waiting while it is still in flight."""
        future = self._pending.expect(session_id)
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self._settings.open_timeout_seconds
            while loop.time() < deadline:
                stored = await self._stored_reply_for(session_id)
                if stored:
                    return stored
                try:
                    return await asyncio.wait_for(asyncio.shield(future), 0.2)
                except asyncio.TimeoutError:
                    continue
            return encode(error_reply("timeout", error_message("timeout")))
        finally:
            self._pending.forget(session_id)

    async def _stored_reply_for(self, session_id: str) -> bytes | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT reply FROM open_requests WHERE session_id = %s AND reply IS NOT NULL", (session_id,)
            )
            row = await cur.fetchone()
        return bytes(row[0]) if row else None

    async def _previous(self, instance_id: str, repo: str) -> core.PreviousConversation | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT session_id, last_activity, COALESCE(open_engine, entry_engine),"
                " resume_key, resume_node_id FROM conversations"
                " WHERE instance_id = %s AND repo = %s"
                " ORDER BY last_activity DESC NULLS LAST, activity_seq DESC, session_id DESC LIMIT 1",
                (instance_id, repo),
            )
            row = await cur.fetchone()
        if row is None:
            return None
        last: datetime | None = row[1].astimezone(timezone.utc) if row[1] else None
        return core.PreviousConversation(row[0], last, row[2], row[3], row[4])

    async def _runner_stateless_engines(self, node_id: str) -> frozenset[str]:
        try:
            kv = await self._js.key_value(subjects.RUNNERS_BUCKET)
            entry = await kv.get(subjects.presence_key(node_id))
            presence = decode(entry.value, RunnerPresence)
            return frozenset(presence.stateless_engines)
        except Exception:
            return frozenset()

    @staticmethod
    async def _entry_content(conn, seq: int) -> str | None:
        cur = await conn.execute("SELECT content FROM timeline_entries WHERE seq = %s", (seq,))
        row = await cur.fetchone()
        return row[0] if row else None

    async def _record_instruction(self, request: OpenRequest, session_id: str, text: str, now) -> None:
        """The person's first message belongs to the new conversation's timeline."""
        body = {
            "entry_id": subjects.instruction_entry_id(session_id),
            "instance_id": request.instance_id,
            "repo": request.repo,
            "session_id": session_id,
            "kind": "chat_user",
            "content": text,
            "at": format_utc(now),
            "engine": request.engine,
        }
        reply = await self._nc.request(subjects.API_TIMELINE_APPEND, encode(body), timeout=5)
        if not msgspec.json.decode(reply.data).get("ok"):
            log.warning("instruction_not_recorded", session_id=session_id)
