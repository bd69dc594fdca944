"""docs/asyncapi.json: the wire contract, with who receives and who sends what generated
from the routing tables.

seedline_contracts.asyncapi holds the contract itself: its channels (streams, APIs, the
runner protocol, notifications, presence), messages and JSON Schemas, all from the
catalogue of seedline_contracts.channels. Who receives and who sends is not written down
by hand: every route of every process's routing table (`routes.py`,
seedline_platform.routing) becomes a receive operation of that process, and everything a
route may send a send operation, each with the process's name and its queue group or
durable. A subject in a table that no channel of the contract carries is an error.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from seedline_contracts import asyncapi as contract
from seedline_contracts import channels, events
from seedline_contracts.channels import event_tag
from seedline_platform.routing import Kind, Route, message_name, sent_subject

from .tables import routing_tables


def _pattern(address: str) -> re.Pattern[str]:
    """A contract address (with {parameters}) as a pattern of subjects (with *)."""
    parts = [r"(\*|[^.]+)" if p.startswith("{") else re.escape(p) for p in address.split(".")]
    return re.compile(r"\.".join(parts) + "$")


def _public() -> list[channels.Channel]:
    return [c for c in channels.CHANNELS if not c.internal]


def _channel_for(subject: str) -> str:
    """The contract channel carrying `subject` (a subject, a filter, or a template with
    {parameters}); a filter ending in > is carried by the first channel under it."""
    if subject.endswith(".>"):
        wanted = subject.split(".")[:-1]
        for channel in _public():
            tokens = channel.address.split(".")
            if len(tokens) > len(wanted) and all(
                    w == "*" or t.startswith("{") or w == t for w, t in zip(wanted, tokens)):
                return channel.id
    subject = re.sub(r"\{[^}]+\}", "*", subject)
    for channel in _public():
        if _pattern(channel.address).match(subject):
            return channel.id
    raise LookupError(f"{subject} is in a routing table but in no contract channel")


def _documented(subject: str) -> bool:
    """Whether a subject is on a public channel (a key ring or an erasure record is not)."""
    channel = channels.carrying(subject)
    return channel is None or not channel.internal


def _event_messages(subject: str, messages: list[str]) -> list[str]:
    """A subscriber on seedline.session.*.<type> receives only that event's message."""
    kind = subject.rsplit(".", 1)[-1]
    named = [cls.__name__ for cls in events.EVENT_TYPES if event_tag(cls) == kind]
    return [m for m in messages if m in named] or messages


def receives() -> list[dict[str, Any]]:
    """Every subscription of every process's table, and every loop that follows a channel
    (presence, erasures): service, subject, route, and the key of its operation
    (service:subject, and @ the durable's name after it where two of a service's consumers
    take the same subject, e.g. a fold and a handler of one event type)."""
    found = [{"service": service, "subject": subject, "route": route}
             for service, table in routing_tables().items() for route in table
             if route.kind is not Kind.LOOP or channels.carrying(route.subject) is not None
             for subject in route.filters if _documented(subject)]
    taken = Counter((r["service"], r["subject"]) for r in found)
    for r in found:
        r["key"] = f"{r['service']}:{r['subject']}"
        if taken[(r["service"], r["subject"])] > 1:
            r["key"] += f"@{r['route'].durable}"
    return found


def sends() -> list[dict[str, Any]]:
    """Everything any route of any process may send: service, subject, route."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for service, table in routing_tables().items():
        for route in table:
            for subject in route.send_filters:
                if _documented(subject):
                    found.setdefault((service, subject),
                                     {"service": service, "subject": subject, "route": route})
    return list(found.values())


def _operation(doc: dict, action: str, subject: str, summary: str) -> dict[str, Any]:
    channel_id = _channel_for(subject)
    names = _event_messages(subject, list(doc["channels"][channel_id]["messages"]))
    return {"action": action, "channel": {"$ref": f"#/channels/{channel_id}"},
            "summary": summary,
            "messages": [{"$ref": f"#/channels/{channel_id}/messages/{m}"} for m in names]}


def _with_reply(doc: dict, op: dict[str, Any], subject: str) -> None:
    reply_id = _channel_for(subject) + "Reply"
    if reply_id in doc["channels"]:
        op["reply"] = {
            "channel": {"$ref": f"#/channels/{reply_id}"},
            "messages": [{"$ref": f"#/channels/{reply_id}/messages/{m}"}
                         for m in doc["channels"][reply_id]["messages"]],
        }


def asyncapi_document() -> dict[str, Any]:
    doc = contract.asyncapi_document()
    operations = dict(doc["operations"])
    for receive in receives():
        route: Route = receive["route"]
        op = _operation(doc, "receive", receive["subject"], route.description)
        op.update({"x-service": receive["service"], "x-subject": receive["subject"],
                   "x-handler": route.handler_name, "x-consumer": route.kind.value,
                   "x-acknowledged": route.acknowledged})
        if route.kind in (Kind.REQUEST, Kind.MESSAGE):
            op["x-queue-group"] = receive["service"]
        if route.durable:
            op["x-durable"] = route.durable
        if route.message is not None:  # decoded at the edge; anything else is parked
            op["x-handler-takes"] = message_name(route.message)
        if route.api is not None:
            op["x-handler-takes"] = route.api.request.__name__
        if sent := [s for s in (sent_subject(x) for x in route.sends) if _documented(s)]:
            op["x-sends"] = sent
        if route.kind is Kind.REQUEST:
            _with_reply(doc, op, receive["subject"])
        operations[receive["key"]] = op
    for send in sends():
        route = send["route"]
        op = _operation(doc, "send", send["subject"], f"{send['service']} sends it "
                        f"({route.handler_name}).")
        op.update({"x-service": send["service"], "x-subject": send["subject"]})
        _with_reply(doc, op, send["subject"])  # a request to a machine is answered
        operations[f"{send['service']}>{send['subject']}"] = op
    doc["operations"] = dict(sorted(operations.items()))
    doc["info"]["description"] += (
        " Operations marked x-service (service:subject receives, service>subject sends) are "
        "generated from the routing tables (seedline_devtools.asyncapi_doc)."
    )
    return doc
