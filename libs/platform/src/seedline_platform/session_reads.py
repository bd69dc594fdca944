"""Reading a conversation's events from SEEDLINE_SESSIONS, typed, with sealed text opened.

Two reads, each written once: the newest event of one type (a direct get of its subject's
last message: no consumer, no table) and a conversation's whole life in order (the one
ephemeral reader, `replay.stored`). Both decode into the contract's types and open what
was sealed at rest (a brief's text, a person's instruction) with the instance's key, so
no surface ever shows ciphertext or reads an event as a raw dict.
"""

from __future__ import annotations

from contextlib import aclosing
from typing import TypeVar

import msgspec
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from seedline_contracts import events as ev
from seedline_contracts import subjects
from seedline_contracts.channels import event_tag
from seedline_contracts.codec import decode, decoder
from seedline_contracts.tokens import TokenError, escape_token

from .outage import NATS_AWAY, StreamsUnavailable
from .replay import stored
from .sealing import Sealer

E = TypeVar("E")

MAX_EVENTS = 2000


async def newest_event(js: JetStreamContext, session_id: str, event_type: type[E],
                       sealer: Sealer | None = None) -> E | None:
    """The conversation's newest event of `event_type`, or None (none yet, an unreadable
    one, or a session id that is no token)."""
    try:
        subject = subjects.session_event_subject(session_id, event_tag(event_type))
    except (TokenError, ValueError):
        return None
    try:
        msg = await js.get_last_msg(subjects.SESSIONS_STREAM, subject)
    except NotFoundError:  # no such event yet (KeyNotFoundError is one too)
        return None
    except NATS_AWAY as exc:
        raise StreamsUnavailable(f"{subject}: {type(exc).__name__}") from exc
    try:
        event = decode(msg.data, event_type)
    except msgspec.MsgspecError:
        return None
    return await opened(event, sealer) if sealer is not None else event


async def conversation_events(js: JetStreamContext, session_id: str, sealer: Sealer | None,
                              limit: int = MAX_EVENTS) -> list[tuple[int, ev.SessionEvent]]:
    """Every event of a conversation's life (CONTRACT.md 7), oldest first, with its seq;
    an event that is not readable as one of the contract's is left out."""
    subject = f"seedline.session.{escape_token(session_id)}.*"
    read = decoder(ev.SessionEvent).decode
    found: list[tuple[int, ev.SessionEvent]] = []
    messages = stored(js, subjects.SESSIONS_STREAM, subject, limit=limit)
    async with aclosing(messages):
        async for msg in messages:
            try:
                event = read(msg.data)
            except (msgspec.MsgspecError, RecursionError):
                continue
            found.append((msg.metadata.sequence.stream,
                          await opened(event, sealer) if sealer is not None else event))
    return found


async def opened(event: E, sealer: Sealer) -> E:
    """The event with the text sealed at rest opened: a brief's text and summary, and the
    person's instruction its launch plan carries. Text of a forgotten instance becomes
    None (it can never be opened again)."""
    replace = msgspec.structs.replace
    plan = getattr(event, "plan", None)
    if plan is not None and plan.instruction is not None:
        instruction = await sealer.open_or_none(None, plan.instruction)
        event = replace(event, plan=replace(plan, instruction=instruction))
    if isinstance(event, ev.SeedComposed):
        # A sealed text names its instance, and its key checks that it is that one's.
        if event.text is not None:
            event = replace(event, text=await sealer.open_or_none(None, event.text))
        if event.summary is not None:
            text = await sealer.open_or_none(None, event.summary.text)
            event = replace(event, summary=None if text is None else replace(
                event.summary, text=text))
    return event
