"""Every subject, stream name and bucket of the wire contract, in one place."""

from __future__ import annotations

from dataclasses import dataclass

from .tokens import TokenError, escape_token, unescape_token

# Streams (CONTRACT.md section 1).
INGEST_STREAM = "SEEDLINE_INGEST"
TIMELINE_STREAM = "SEEDLINE_TIMELINE"
SESSIONS_STREAM = "SEEDLINE_SESSIONS"
REJECTED_STREAM = "SEEDLINE_REJECTED"
NOTICES_STREAM = "SEEDLINE_NOTICES"  # 1.2: notices are kept; a notice's id is its seq here
NOTIFY_ALL = "seedline.notify.>"

INGEST_TIMELINE = "seedline.ingest.timeline"
# Runner-scoped ingest (CONTRACT.md 6): a machine publishes its engines' output
# only to seedline.ingest.runner.<node>; the writer checks it against the launches.
INGEST_RUNNER_ALL = "seedline.ingest.runner.*"
# Every subject a producer may publish ingest to. The forms that end in the entry's
# instance (seedline.ingest.timeline.<instance>, seedline.ingest.runner.<node>.<instance>)
# let the server spread ingest over partitions by instance (CONTRACT.md 2.2).
INGEST_SUBJECTS = (INGEST_TIMELINE, INGEST_TIMELINE + ".*", INGEST_RUNNER_ALL,
                   INGEST_RUNNER_ALL + ".*")
REJECTED_TIMELINE = "seedline.rejected.timeline"
REJECTED_SESSIONS = "seedline.rejected.sessions"
TIMELINE_ALL = "seedline.timeline.>"
TIMELINE_CHAT_USER = "seedline.timeline.*.*.*.chat_user"
SESSION_EVENTS_ALL = "seedline.session.>"

# Request/reply APIs: all under seedline.api.>, which no stream captures.
API_TIMELINE_APPEND = "seedline.api.timeline.append"
API_TIMELINE_READ = "seedline.api.timeline.read"
API_SESSIONS_OPEN = "seedline.api.sessions.open"
API_SESSIONS_RELOCATE = "seedline.api.sessions.relocate"
API_SESSIONS_STOP = "seedline.api.sessions.stop"
API_SESSIONS_LIST = "seedline.api.sessions.list"
API_BRIEFS_GET = "seedline.api.briefs.get"
# Forget an instance: only an operator's NATS user may ask (CONTRACT.md Erasure).
API_INSTANCES_FORGET = "seedline.api.instances.forget"
# Stop what a machine an operator removes is running: only an operator's NATS user may ask.
API_MACHINES_REMOVE = "seedline.api.machines.remove"

RUNNERS_BUCKET = "seedline_runners"
# What machines save of a conversation that stops: its working tree and its engine's
# record, sealed (CONTRACT.md 6).
WORKTREES_BUCKET = "seedline_worktrees"
RUNNERS_TTL_SECONDS = 30
PRESENCE_INTERVAL_SECONDS = 10


def timeline_subject(instance_id: str, repo: str, session_id: str, kind: str) -> str:
    return (
        f"seedline.timeline.{escape_token(instance_id)}.{escape_token(repo)}"
        f".{escape_token(session_id)}.{kind}"
    )


def ingest_runner_subject(node_id: str, instance_id: str | None = None) -> str:
    subject = f"seedline.ingest.runner.{escape_token(node_id)}"
    return subject if instance_id is None else f"{subject}.{escape_token(instance_id)}"


def ingest_timeline_subject(instance_id: str) -> str:
    """The trusted ingest subject that names the entry's instance (partitionable)."""
    return f"{INGEST_TIMELINE}.{escape_token(instance_id)}"


def ingest_partition_mappings(partitions: int) -> dict[str, str]:
    """nats-server subject mappings that spread ingest over `partitions` by instance.

    The forms without an instance all go to partition 0, so one producer's entries of
    one instance keep their order as long as it uses one form.
    """
    p = "seedline.ingest.p"  # partition i's ingest: seedline.ingest.p.<i>.<form>
    return {
        INGEST_TIMELINE: f"{p}.0.timeline",
        INGEST_TIMELINE + ".*": f"{p}.{{{{partition({partitions},1)}}}}.timeline.{{{{wildcard(1)}}}}",
        INGEST_RUNNER_ALL: f"{p}.0.runner.{{{{wildcard(1)}}}}",
        INGEST_RUNNER_ALL + ".*":
            f"{p}.{{{{partition({partitions},2)}}}}.runner.{{{{wildcard(1)}}}}.{{{{wildcard(2)}}}}",
    }


def ingest_partition_filter(partition: int | str = "*") -> str:
    """The ingest of one partition as the server maps it (of every partition: "*")."""
    return f"seedline.ingest.p.{partition}.>"


@dataclass(frozen=True)
class IngestOrigin:
    """Who published an ingest message, read from its subject (after any mapping)."""

    runner_node: str | None  # the machine, for runner-scoped ingest; None for trusted
    instance_id: str | None  # the instance the subject names, when it names one


def ingest_origin(subject: str) -> IngestOrigin | None:
    """The origin of an ingest subject, or None when the subject is not one of its forms."""
    tokens = subject.split(".")
    if tokens[:3] == ["seedline", "ingest", "p"] and len(tokens) > 4:
        tokens = ["seedline", "ingest", *tokens[4:]]
    try:
        if tokens[:3] == ["seedline", "ingest", "timeline"] and len(tokens) in (3, 4):
            instance = unescape_token(tokens[3]) if len(tokens) == 4 else None
            return IngestOrigin(None, instance)
        if tokens[:3] == ["seedline", "ingest", "runner"] and len(tokens) in (4, 5):
            instance = unescape_token(tokens[4]) if len(tokens) == 5 else None
            return IngestOrigin(unescape_token(tokens[3]), instance)
    except TokenError:
        return None
    return None


def session_event_subject(session_id: str, event_type: str) -> str:
    return f"seedline.session.{escape_token(session_id)}.{event_type}"


def session_event_filter(event_type: str) -> str:
    return f"seedline.session.*.{event_type}"


def runner_subject(node_id: str, verb: str) -> str:
    """verb is one of launch, turn, stop, events."""
    return f"seedline.runner.{escape_token(node_id)}.{verb}"


def runner_inbox_prefix(node_id: str) -> str:
    """The reply inbox prefix a runner connects with (nats-py ``inbox_prefix=``).

    Its own prefix, not ``_INBOX``: under deploy/nats-secure.conf a runner may
    subscribe only there, so it never listens on anyone else's replies.
    """
    return f"_INBOX_{escape_token(node_id)}"


def service_inbox_prefix(service: str) -> str:
    """The reply inbox prefix a service connects with: its NATS user may subscribe only there."""
    return f"_INBOX_{escape_token(service)}"


def notify_subject(instance_id: str) -> str:
    return f"seedline.notify.{escape_token(instance_id)}"


def presence_key(node_id: str) -> str:
    """The KV key for a node's presence.

    KV keys allow ``[-/_=.A-Za-z0-9]`` but not ``~``, so the escaped token spells
    its escapes with ``=`` instead. Plain node ids (``mac-mini-1``) are unchanged.
    """
    return escape_token(node_id).replace("~", "=")


def node_from_presence_key(key: str) -> str:
    from .tokens import unescape_token

    return unescape_token(key.replace("=", "~"))


def instruction_entry_id(session_id: str) -> str:
    """entry_id of the chat_user entry that records an open's instruction.

    The gateway knows this entry reaches the machine as the launch's instruction,
    so it never delivers it a second time as a turn.
    """
    return f"{session_id}:instruction"


def worktree_object(instance_id: str, session_id: str, n: int, part: str = "") -> str:
    """The name of a saved object: `<escaped instance>/<session_id>/<n>` for a tree, with
    `-record` for the engine's record beside it (CONTRACT.md 6)."""
    return f"{escape_token(instance_id)}/{session_id}/{n}{part}"


def worktree_prefix(instance_id: str) -> str:
    """Every saved object of an instance starts with this."""
    return f"{escape_token(instance_id)}/"
