"""The AsyncAPI 3.0 document of the whole wire contract, built from this library.

Channels carry the subjects of ``subjects`` (tokens made from user data are
parameters), messages point at the JSON Schemas of ``schema`` (inline under
``components.schemas``, and by file name under ``x-json-schema``), and operations
are seen from the platform: ``receive`` is what Seedline consumes or answers,
``send`` what it publishes or asks a runner. ``published_files()`` is the exact
text committed under docs/; ``seedline docs --out docs`` writes it.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from . import events, subjects
from .schema import PUBLIC_MESSAGES, json_schemas
from .timeline import KINDS

VERSION = "1"
CONTENT_TYPE = "application/json"
SCHEMA_DIR = "schema"

_TOKEN = (
    "An escaped subject token: every byte of the UTF-8 form outside [A-Za-z0-9_-] is "
    "written as ~ and two upper-case hex digits; never empty, at most 255 bytes."
)
PARAMETERS: dict[str, dict[str, Any]] = {
    "instance": {"description": f"Instance id. {_TOKEN}", "examples": ["bd43f4de"]},
    "repo": {"description": f"Repository. {_TOKEN}", "examples": ["apps~2Fchess-academy"]},
    "session": {
        "description": f"Conversation id (session_id). {_TOKEN}",
        "examples": ["csess_21b8d1b9"],
    },
    "node": {"description": f"Runner machine id (node_id). {_TOKEN}", "examples": ["mac-mini-1"]},
    "partition": {"description": "An ingest partition, 0 to SEEDLINE_INGEST_PARTITIONS - 1.",
                  "examples": ["0"]},
    "kind": {"description": "Entry kind.", "enum": list(KINDS)},
    "type": {
        "description": "Event type.",
        "enum": [e.__struct_config__.tag for e in events.EVENT_TYPES],
    },
    "presence_key": {
        "description": "subjects.presence_key(node_id): the escaped node id with = instead of ~ "
        "(KV keys allow no ~).",
        "examples": ["mac-mini-1"],
    },
}


def _channel(address: str | None, messages: list[str], description: str) -> dict[str, Any]:
    channel: dict[str, Any] = {"address": address, "description": description}
    names = [p[1:-1] for p in (address or "").split(".") if p.startswith("{")]
    if names:
        channel["parameters"] = {name: PARAMETERS[name] for name in names}
    channel["messages"] = {m: {"$ref": f"#/components/messages/{m}"} for m in messages}
    return channel


EVENT_NAMES = [cls.__name__ for cls in events.EVENT_TYPES]
NOTIFICATIONS = [
    "StoppedIdleNotification",
    "RunnerOfflineNotification",
    "RunnerRestartedNotification",
    "NotWokenNotification",
]

# channel id -> (address, messages, description)
CHANNELS: dict[str, tuple[str, list[str], str]] = {
    "ingestTimeline": (
        subjects.INGEST_TIMELINE,
        ["TimelineEntryIn"],
        "Stream SEEDLINE_INGEST. Producers publish entries here with JetStream, "
        "header Nats-Msg-Id = entry_id (CONTRACT.md 2.1).",
    ),
    "ingestRunner": (
        "seedline.ingest.runner.{node}",
        ["TimelineEntryIn"],
        "Stream SEEDLINE_INGEST. A runner machine publishes its engines' output here, as it "
        "happens; accepted only for conversations launched on that machine, never chat_user "
        "(6, 1.1).",
    ),
    "ingestTimelineOfInstance": (
        "seedline.ingest.timeline.{instance}",
        ["TimelineEntryIn"],
        "Stream SEEDLINE_INGEST. The same as seedline.ingest.timeline, on a subject that names "
        "the entry's instance, so the server can spread ingest over partitions by instance "
        "(2.2, 1.1). The instance must be the entry's own.",
    ),
    "ingestRunnerOfInstance": (
        "seedline.ingest.runner.{node}.{instance}",
        ["TimelineEntryIn"],
        "Stream SEEDLINE_INGEST. Runner-scoped ingest naming the entry's instance (6, 1.1).",
    ),
    "ingestPartition": (
        "seedline.ingest.p.{partition}.timeline.{instance}",
        ["TimelineEntryIn"],
        "Stream SEEDLINE_INGEST. Where the server's subject mapping puts partition p's "
        "entries (runner-scoped ones under seedline.ingest.p.<p>.runner.<node>.<instance>); "
        "the writer of partition p consumes seedline.ingest.p.<p>.>.",
    ),
    "timelineEntries": (
        "seedline.timeline.{instance}.{repo}.{session}.{kind}",
        ["TimelineEntry"],
        "Stream SEEDLINE_TIMELINE, the source of truth; the stream sequence is "
        "the entry's seq. Only the timeline-writer publishes here (2.2).",
    ),
    "rejectedTimeline": (
        subjects.REJECTED_TIMELINE,
        ["RejectedInput"],
        "Stream SEEDLINE_REJECTED: ingest input that could not be accepted, "
        "and timeline entries parked as poison.",
    ),
    "rejectedSessions": (
        subjects.REJECTED_SESSIONS,
        ["RejectedInput"],
        "Stream SEEDLINE_REJECTED: conversation events parked as poison.",
    ),
    "sessionEvents": (
        "seedline.session.{session}.{type}",
        EVENT_NAMES,
        "Stream SEEDLINE_SESSIONS: every step of a conversation's life (7).",
    ),
    "timelineAppend": (
        subjects.API_TIMELINE_APPEND,
        ["TimelineEntryIn"],
        "Synchronous append: the same body as the ingest subject (2.1).",
    ),
    "timelineRead": (
        subjects.API_TIMELINE_READ,
        ["TimelineReadRequest"],
        "Read a repo's or one conversation's entries, newest page first (2.3).",
    ),
    "sessionsOpen": (
        subjects.API_SESSIONS_OPEN,
        ["OpenRequest"],
        "Open a conversation: resume or brief a fresh engine (3).",
    ),
    "sessionsRelocate": (
        subjects.API_SESSIONS_RELOCATE,
        ["RelocateRequest"],
        "Move a conversation to another machine (4).",
    ),
    "sessionsStop": (subjects.API_SESSIONS_STOP, ["StopRequest"], "Stop a live conversation (4)."),
    "sessionsList": (
        subjects.API_SESSIONS_LIST,
        ["SessionsListRequest"],
        "List live conversations, optionally of one instance.",
    ),
    "instancesForget": (
        subjects.API_INSTANCES_FORGET,
        ["ForgetRequest"],
        "Forget an instance: its key, its rows, its notices (Erasure, 1.2); operators only.",
    ),
    "briefsGet": (
        subjects.API_BRIEFS_GET,
        ["BriefGetRequest"],
        "The latest brief offered to a conversation, byte for byte (4).",
    ),
    "runnerLaunch": (
        "seedline.runner.{node}.launch",
        ["LaunchRequest"],
        "The gateway asks a machine to launch an engine (6).",
    ),
    "runnerTurn": (
        "seedline.runner.{node}.turn",
        ["TurnRequest"],
        "A person's message for a live conversation; at least once (6).",
    ),
    "runnerStop": (
        "seedline.runner.{node}.stop",
        ["RunnerStopRequest"],
        "The gateway asks a machine to stop a conversation (6).",
    ),
    "runnerEvents": (
        "seedline.runner.{node}.events",
        ["RunnerEvent"],
        "A machine reports engine_bound and exited (6).",
    ),
    "notify": (
        "seedline.notify.{instance}",
        NOTIFICATIONS,
        "What the platform tells the people of an instance (4).",
    ),
    "runnerPresence": (
        f"$KV.{subjects.RUNNERS_BUCKET}.{{presence_key}}",
        ["RunnerPresence"],
        f"KV bucket {subjects.RUNNERS_BUCKET} (TTL {subjects.RUNNERS_TTL_SECONDS} s):"
        f" a machine puts its presence at least every "
        f"{subjects.PRESENCE_INTERVAL_SECONDS} s; a missing key means offline (6).",
    ),
}

# request channel -> replies (an ErrorReply is always possible on the API)
REPLIES: dict[str, list[str]] = {
    "timelineAppend": ["AppendReply", "ErrorReply"],
    "timelineRead": ["TimelineReadReply", "ErrorReply"],
    "sessionsOpen": ["OpenReply", "ErrorReply"],
    "sessionsRelocate": ["OpenReply", "ErrorReply"],
    "sessionsStop": ["StopReply", "ErrorReply"],
    "sessionsList": ["SessionsListReply", "ErrorReply"],
    "briefsGet": ["BriefGetReply", "ErrorReply"],
    "instancesForget": ["ForgetReply", "ErrorReply"],
    "runnerLaunch": ["LaunchReply"],
    "runnerTurn": ["TurnReply"],
    "runnerStop": ["RunnerStopReply"],
}

# operation id -> (action, channel, summary). What a service receives through FastStream is
# generated from its subscribers (seedline_devtools.asyncapi_doc); listed here are the sends
# and the receives that are not FastStream subscribers.
OPERATIONS: dict[str, tuple[str, str, str]] = {
    "receiveTimelineEntry": ("receive", "ingestTimeline", "The timeline-writer consumes ingest."),
    "receiveRunnerOutput": ("receive", "ingestRunner", "The timeline-writer consumes it."),
    "receiveTimelineEntryOfInstance": (
        "receive", "ingestTimelineOfInstance", "The timeline-writer consumes ingest."),
    "receiveRunnerOutputOfInstance": (
        "receive", "ingestRunnerOfInstance", "The timeline-writer consumes it."),
    "receivePartition": (
        "receive", "ingestPartition", "The writer of that partition consumes it."),
    "storeTimelineEntry": ("send", "timelineEntries", "The timeline-writer appends."),
    "rejectTimelineInput": ("send", "rejectedTimeline", "Input that could not be accepted."),
    "parkConversationEvent": ("send", "rejectedSessions", "An event that kept failing."),
    "recordConversationEvent": ("send", "sessionEvents", "The services record each step."),
    "notifyInstance": ("send", "notify", "The runner-gateway tells people what happened."),
    "launchOnRunner": ("send", "runnerLaunch", "The runner-gateway launches; the machine replies."),
    "deliverTurn": ("send", "runnerTurn", "The runner-gateway delivers; the machine replies."),
    "stopOnRunner": ("send", "runnerStop", "The runner-gateway stops; the machine replies."),
    "receivePresence": ("receive", "runnerPresence", "Services read presence to find machines."),
}

HEADERS = {
    "TimelineEntryIn": {
        "type": "object",
        "properties": {
            "Nats-Msg-Id": {
                "type": "string",
                "description": "Optional JetStream dedupe id; when present, equal to entry_id.",
            }
        },
    }
}


def _summary(kind: type) -> str | None:
    doc = (kind.__doc__ or "").strip()
    return doc.splitlines()[0] if doc else None


def _messages() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, kind in PUBLIC_MESSAGES.items():
        message: dict[str, Any] = {"name": name, "title": name, "contentType": CONTENT_TYPE}
        if summary := _summary(kind):
            message["summary"] = summary
        if name in HEADERS:
            message["headers"] = HEADERS[name]
        message["payload"] = {"$ref": f"#/components/schemas/{name}"}
        message["x-json-schema"] = f"{SCHEMA_DIR}/{name}.json"
        out[name] = message
    return out


def _schemas() -> dict[str, Any]:
    kinds = [PUBLIC_MESSAGES[name] for name in sorted(PUBLIC_MESSAGES)]
    _, components = msgspec.json.schema_components(
        kinds, ref_template="#/components/schemas/{name}"
    )
    return dict(sorted(components.items()))


def asyncapi_document() -> dict[str, Any]:
    channels: dict[str, Any] = {}
    for channel_id, (address, messages, description) in CHANNELS.items():
        channels[channel_id] = _channel(address, messages, description)
        if channel_id in REPLIES:
            channels[channel_id + "Reply"] = _channel(
                None,
                REPLIES[channel_id],
                "The requester's NATS reply subject (an inbox), so it has no fixed address.",
            )
    operations: dict[str, Any] = {}
    for op_id, (action, channel_id, summary) in OPERATIONS.items():
        op: dict[str, Any] = {
            "action": action,
            "channel": {"$ref": f"#/channels/{channel_id}"},
            "summary": summary,
            "messages": [
                {"$ref": f"#/channels/{channel_id}/messages/{m}"} for m in CHANNELS[channel_id][1]
            ],
        }
        if channel_id in REPLIES:
            reply_id = channel_id + "Reply"
            op["reply"] = {
                "channel": {"$ref": f"#/channels/{reply_id}"},
                "messages": [
                    {"$ref": f"#/channels/{reply_id}/messages/{m}"} for m in REPLIES[channel_id]
                ],
            }
        operations[op_id] = op
    return {
        "asyncapi": "3.0.0",
        "id": "urn:seedline:wire-contract",
        "info": {
            "title": "Seedline wire contract",
            "version": VERSION,
            "description": (
                "Everything other systems publish, what they can ask, and what a runner machine "
                "must speak: JSON (UTF-8) over NATS. Operations are seen from the platform: "
                "receive = Seedline consumes or answers it, send = Seedline publishes it or asks "
                "a runner. Every error reply is ErrorReply. Generated from the seedline-contracts "
                "library (`seedline docs --out docs`); CONTRACT.md is the prose."
            ),
        },
        "defaultContentType": CONTENT_TYPE,
        "servers": {
            "local": {
                "host": "127.0.0.1:4222",
                "protocol": "nats",
                "description": "`seedline up` or `docker compose up`; SEEDLINE_NATS_URL elsewhere.",
            }
        },
        "channels": channels,
        "operations": operations,
        "components": {"messages": _messages(), "schemas": _schemas()},
    }


def render(document: Any) -> str:
    """The committed form of a JSON document: two-space indent, UTF-8, final newline."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def published_files() -> dict[str, str]:
    """Path under docs/ -> exact text: asyncapi.json and one schema/NAME.json per message."""
    files = {"asyncapi.json": render(asyncapi_document())}
    for name, document in json_schemas().items():
        files[f"{SCHEMA_DIR}/{name}.json"] = render(document)
    return files
