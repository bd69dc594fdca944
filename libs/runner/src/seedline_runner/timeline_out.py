"""What a runner publishes to the timeline, built without any I/O.

Entry ids are a pure function of (conversation, step, part): the part is the
output's place in its step, in the order the engine emitted it. Publishing the same
output again, after a retry or a redelivered turn, is so recognised as a duplicate
by the ingest stream and the timeline-writer.

The output that ends a step (the engine's own end of its turn, or its failure) has
the part ``end``: whoever reads the timeline (an editor on ``seedline acp``) knows the
turn answering message N is over when ``end_entry_id(conversation, turn_step(N))``
appears, or ``LAUNCH_STEP``'s for the conversation that message woke.
"""

from __future__ import annotations

import hashlib
import re

from seedline_contracts.timeline import MAX_ENTRY_ID_CHARS, TimelineEntryIn

from .engines.base import EngineOutput

LAUNCH_STEP = "launch"
END_PART = "end"
_PLAIN_ENTRY_ID = re.compile(r"[^\s\x00-\x1f\x7f]+")


def turn_step(seq: int) -> str:
    return f"turn-{seq}"


def end_entry_id(session_id: str, step: str) -> str:
    """The id of the entry that ends a step (its engine's end of turn)."""
    return entry_id(session_id, step, END_PART)


def entry_id(session_id: str, step: str, part: int | str) -> str:
    plain = f"{session_id}:{step}:{part}"
    if len(plain) <= MAX_ENTRY_ID_CHARS and _PLAIN_ENTRY_ID.fullmatch(plain):
        return plain
    return "runner-" + hashlib.sha256(plain.encode("utf-8")).hexdigest()


def timeline_entry(
    *,
    instance_id: str,
    repo: str,
    session_id: str,
    engine: str,
    step: str,
    index: int | str,
    output: EngineOutput,
    at: str,
) -> TimelineEntryIn:
    """The ``index``-th output of one step, as the entry that carries it.

    An output the engine's transcript names keeps that id, so importing or capturing
    the transcript later adds nothing twice; the step's end is always its end mark."""
    named = output.entry_id if index != END_PART else None
    return TimelineEntryIn(
        entry_id=named or entry_id(session_id, step, index),
        instance_id=instance_id,
        repo=repo,
        session_id=session_id,
        kind=output.kind,
        content=output.content,
        at=at,
        engine=engine,
    )
