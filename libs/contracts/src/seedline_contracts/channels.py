"""Every channel of the wire contract with the messages it carries, in one catalogue.

A channel is an address (a subject, with `{parameters}` for tokens made from data) and
the contract types that travel on it (seedline_contracts.channel); a request/reply API
also has its request and reply types, and is declared beside them. The services' routing
tables name these channels in what they take and send, the client asks through them, and
the AsyncAPI document, the JSON Schema list and the NATS permissions are generated from
them (DESIGN.md rule 11).
"""

from __future__ import annotations

import sys

from . import events, instances, runner, sessions, subjects, timeline
from .channel import Api as Api
from .channel import Channel as Channel
from .channel import MachineCall as MachineCall
from .channel import event_tag as event_tag
from .channel import union_members
# The APIs and machine calls are declared beside their types; re-exported so a reader of
# the catalogue finds every channel by one name.
from .instances import INSTANCES_FORGET as INSTANCES_FORGET
from .runner import MACHINES_REMOVE as MACHINES_REMOVE
from .runner import PRESENCE as PRESENCE
from .runner import RUNNER_EVENTS as RUNNER_EVENTS
from .runner import RUNNER_LAUNCH as RUNNER_LAUNCH
from .runner import RUNNER_STOP as RUNNER_STOP
from .runner import RUNNER_TURN as RUNNER_TURN
from .sessions import BRIEFS_GET as BRIEFS_GET
from .sessions import SESSIONS_LIST as SESSIONS_LIST
from .sessions import SESSIONS_OPEN as SESSIONS_OPEN
from .sessions import SESSIONS_RELOCATE as SESSIONS_RELOCATE
from .sessions import SESSIONS_STOP as SESSIONS_STOP
from .timeline import TIMELINE_APPEND as TIMELINE_APPEND
from .timeline import TIMELINE_READ as TIMELINE_READ

# -- streams --------------------------------------------------------------------------

INGEST = Channel(
    "ingestTimeline", subjects.INGEST_TIMELINE, (timeline.TimelineEntryIn,),
    "Stream SEEDLINE_INGEST. Producers publish entries here with JetStream, header "
    "Nats-Msg-Id = entry_id (CONTRACT.md 2.1).")
INGEST_OF_INSTANCE = Channel(
    "ingestTimelineOfInstance", subjects.INGEST_TIMELINE + ".{instance}",
    (timeline.TimelineEntryIn,),
    "Stream SEEDLINE_INGEST. The same as seedline.ingest.timeline, on a subject that names "
    "the entry's instance, so the server can spread ingest over partitions by instance "
    "(2.2). The instance must be the entry's own.")
INGEST_RUNNER = Channel(
    "ingestRunner", "seedline.ingest.runner.{node}", (timeline.TimelineEntryIn,),
    "Stream SEEDLINE_INGEST. A runner machine publishes its engines' output here, as it "
    "happens; accepted only for conversations launched on that machine, never chat_user "
    "(6).")
INGEST_RUNNER_OF_INSTANCE = Channel(
    "ingestRunnerOfInstance", "seedline.ingest.runner.{node}.{instance}",
    (timeline.TimelineEntryIn,),
    "Stream SEEDLINE_INGEST. Runner-scoped ingest naming the entry's instance (6).")
INGEST_PARTITION = Channel(
    "ingestPartition", "seedline.ingest.p.{partition}.timeline.{instance}",
    (timeline.TimelineEntryIn,),
    "Stream SEEDLINE_INGEST. Where the server's subject mapping puts partition p's entries "
    "(runner-scoped ones under seedline.ingest.p.<p>.runner.<node>.<instance>); the writer "
    "of partition p consumes seedline.ingest.p.<p>.>.")
TIMELINE = Channel(
    "timelineEntries", "seedline.timeline.{instance}.{repo}.{session}.{kind}",
    (timeline.TimelineEntry,),
    "Stream SEEDLINE_TIMELINE, the source of truth; the stream sequence is the entry's seq. "
    "Only the timeline-writer publishes here (2.2).")
REJECTED_TIMELINE = Channel(
    "rejectedTimeline", subjects.REJECTED_TIMELINE, (timeline.RejectedInput,),
    "Stream SEEDLINE_REJECTED: ingest input that could not be accepted, and timeline "
    "entries parked as poison.")
REJECTED_SESSIONS = Channel(
    "rejectedSessions", subjects.REJECTED_SESSIONS, (timeline.RejectedInput,),
    "Stream SEEDLINE_REJECTED: conversation events parked as poison.")
SESSION_EVENTS = Channel(
    "sessionEvents", "seedline.session.{session}.{type}", events.EVENT_TYPES,
    "Stream SEEDLINE_SESSIONS: every step of a conversation's life (7).")
NOTIFY = Channel(
    "notify", "seedline.notify.{instance}", union_members(sessions.Notification),
    "What the platform tells the people of an instance; SEEDLINE_NOTICES keeps every notice, "
    "its stream sequence its id (1, 4).")

# -- the platform's own (not published) --------------------------------------------------

KEY_RINGS = Channel(
    "keyRings", "$KV.seedline_keys.{instance}", (), "Each instance's key ring (Erasure): "
    "the writers of sealed content may make one; forgetting an instance destroys it.",
    internal=True)
WORKTREES = Channel(
    "worktrees", f"$O.{subjects.WORKTREES_BUCKET}.>", (),
    "The object store of saved checkouts and engine records (CONTRACT.md 6), sealed: "
    "machines save to it as a conversation stops; the gateway deletes what is older than "
    "each conversation's newest save and each repo's newest three.", internal=True)
ERASURES = Channel(
    "erasures", "$KV.seedline_forgotten.{instance}", (instances.Erasure,),
    "The record that an instance was forgotten; every owner of rows follows it.",
    internal=True)


def _declared(*modules) -> tuple[Channel, ...]:
    found: dict[str, Channel] = {}
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, Channel):
                found.setdefault(value.id, value)
    return tuple(found.values())


# Every channel, wherever it is declared: each API beside its types (a new one is found
# there, named nowhere else), the streams and the platform's own here. Listed in the
# order the documents show them: streams, then APIs, then the platform's own.
_APIS_AND_CALLS = _declared(timeline, sessions, instances, runner)
_HERE = tuple(c for c in _declared(sys.modules[__name__]) if c not in _APIS_AND_CALLS)
CHANNELS: tuple[Channel, ...] = (
    tuple(c for c in _HERE if not c.internal) + _APIS_AND_CALLS
    + tuple(c for c in _HERE if c.internal))
APIS: tuple[Api, ...] = tuple(c for c in CHANNELS if isinstance(c, Api))


def carrying(subject: str) -> Channel | None:
    """The channel a concrete subject (or a filter with `*`) is on, if any."""
    tokens = subject.split(".")
    for channel in CHANNELS:
        pattern = channel.filter.split(".")
        if len(pattern) == len(tokens) and all(
                p == "*" or p == t for p, t in zip(pattern, tokens)):
            return channel
    return None
