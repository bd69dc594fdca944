"""Every channel of the wire contract with the messages it carries, in one catalogue.

A channel is an address (a subject, with `{parameters}` for tokens made from data) and
the contract types that travel on it; a request channel (an `Api`) also has its request
and reply types. This is the one place those facts are kept: the services' routing
tables name these channels in what they take and send, the client asks through them,
and the AsyncAPI document, the JSON Schema list and the NATS permissions are generated
from them (DESIGN.md rule 11).
"""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass

from . import errors, events, instances, runner, sessions, subjects, timeline
from .tokens import escape_token, unescape_token

_PARAMETER = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True)
class Channel:
    id: str  # the AsyncAPI channel id
    address: str  # a subject; a token written {name} is made from data
    messages: tuple[type, ...]
    description: str
    # Not part of the public contract (a key ring, a record of erasures): it has
    # permissions and rows, but no place in the published documents.
    internal: bool = False

    @property
    def parameters(self) -> tuple[str, ...]:
        return tuple(_PARAMETER.findall(self.address))

    @property
    def filter(self) -> str:
        """The address as a NATS subject filter: each parameter a `*`."""
        return _PARAMETER.sub("*", self.address)

    def subject(self, **values: str) -> str:
        """The address with each parameter's value escaped into a token."""
        missing = set(self.parameters) - values.keys()
        if missing:
            raise TypeError(f"{self.address} needs {', '.join(sorted(missing))}")
        return _PARAMETER.sub(lambda m: escape_token(values[m.group(1)]), self.address)

    def values(self, subject: str) -> dict[str, str]:
        """The parameters a subject of this channel carries, unescaped (TokenError when one
        is not a token; ValueError when the subject is not this channel's)."""
        pattern = self.address.split(".")
        tokens = subject.split(".")
        if len(tokens) != len(pattern):
            raise ValueError(f"{subject} is not on {self.address}")
        found = {}
        for want, token in zip(pattern, tokens):
            name = _PARAMETER.fullmatch(want)
            if name:
                found[name.group(1)] = unescape_token(token)
            elif want != token:
                raise ValueError(f"{subject} is not on {self.address}")
        return found


@dataclass(frozen=True)
class Api(Channel):
    """A request/reply API: its request type first in `messages`, then what it answers
    (every API may also answer ErrorReply)."""

    reply: type = errors.ErrorReply
    # How the API names its request in a refusal ("The open request is not valid: ...").
    title: str = ""
    # A body that is not JSON is `not_json` where the contract says so (2.1, 3), else
    # `invalid_request` like any other malformed request (2.3).
    not_json: bool = False

    @property
    def request(self) -> type:
        return self.messages[0]

    @property
    def replies(self) -> tuple[type, ...]:
        return (self.reply, errors.ErrorReply)


@dataclass(frozen=True)
class MachineCall(Channel):
    """A request the platform sends to one machine (CONTRACT.md 6); the machine answers it."""

    reply: type = errors.ErrorReply

    @property
    def replies(self) -> tuple[type, ...]:
        return (self.reply,)


def union_members(kind: object) -> tuple[type, ...]:
    """The types of a union (a union of tagged structs is how the contract lists them)."""
    return typing.get_args(kind) or (kind,)  # type: ignore[return-value]


def event_tag(event_type: type) -> str:
    return event_type.__struct_config__.tag  # type: ignore[attr-defined]


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

# -- request/reply APIs (all under seedline.api.>, which no stream captures) ------------

TIMELINE_APPEND = Api(
    "timelineAppend", subjects.API_TIMELINE_APPEND, (timeline.TimelineEntryIn,),
    "Synchronous append: the same body as the ingest subject (2.1).",
    reply=timeline.AppendReply, title="append", not_json=True)
TIMELINE_READ = Api(
    "timelineRead", subjects.API_TIMELINE_READ, (timeline.TimelineReadRequest,),
    "Read a repo's or one conversation's entries, newest page first (2.3).",
    reply=timeline.TimelineReadReply, title="read")
SESSIONS_OPEN = Api(
    "sessionsOpen", subjects.API_SESSIONS_OPEN, (sessions.OpenRequest,),
    "Open a conversation: resume or brief a fresh engine (3).",
    reply=sessions.OpenReply, title="open", not_json=True)
SESSIONS_RELOCATE = Api(
    "sessionsRelocate", subjects.API_SESSIONS_RELOCATE, (sessions.RelocateRequest,),
    "Move a conversation to another machine (4).",
    reply=sessions.OpenReply, title="relocation")
SESSIONS_STOP = Api(
    "sessionsStop", subjects.API_SESSIONS_STOP, (sessions.StopRequest,),
    "Stop a live conversation (4).", reply=sessions.StopReply, title="stop")
SESSIONS_LIST = Api(
    "sessionsList", subjects.API_SESSIONS_LIST, (sessions.SessionsListRequest,),
    "List live conversations, optionally of one instance.",
    reply=sessions.SessionsListReply, title="list")
BRIEFS_GET = Api(
    "briefsGet", subjects.API_BRIEFS_GET, (sessions.BriefGetRequest,),
    "The latest brief offered to a conversation, byte for byte (4).",
    reply=sessions.BriefGetReply, title="brief")
INSTANCES_FORGET = Api(
    "instancesForget", subjects.API_INSTANCES_FORGET, (instances.ForgetRequest,),
    "Forget an instance: its key, its rows, its notices (Erasure); operators only.",
    reply=instances.ForgetReply, title="forget")

# -- machines (CONTRACT.md 6) ----------------------------------------------------------

RUNNER_LAUNCH = MachineCall(
    "runnerLaunch", "seedline.runner.{node}.launch", (runner.LaunchRequest,),
    "The gateway asks a machine to launch an engine (6).", reply=runner.LaunchReply)
RUNNER_TURN = MachineCall(
    "runnerTurn", "seedline.runner.{node}.turn", (runner.TurnRequest,),
    "A person's message for a live conversation; at least once (6).", reply=runner.TurnReply)
RUNNER_STOP = MachineCall(
    "runnerStop", "seedline.runner.{node}.stop", (runner.RunnerStopRequest,),
    "The gateway asks a machine to stop a conversation (6).", reply=runner.RunnerStopReply)
RUNNER_EVENTS = Channel(
    "runnerEvents", "seedline.runner.{node}.events", (runner.RunnerEvent,),
    "A machine reports engine_bound, resume_lost and exited (6).")
PRESENCE = Channel(
    "runnerPresence", f"$KV.{subjects.RUNNERS_BUCKET}.{{presence_key}}",
    (runner.RunnerPresence,),
    f"KV bucket {subjects.RUNNERS_BUCKET} (TTL {subjects.RUNNERS_TTL_SECONDS} s): a machine "
    f"puts its presence at least every {subjects.PRESENCE_INTERVAL_SECONDS} s; a missing key "
    "means offline (6).")

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


CHANNELS: tuple[Channel, ...] = tuple(
    value for value in list(globals().values()) if isinstance(value, Channel))
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
