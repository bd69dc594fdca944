"""docs/asyncapi.json: the wire contract, with who receives and who sends what generated
from the services' routing tables.

seedline_contracts.asyncapi holds the contract itself: its channels (streams, APIs,
the runner protocol, notifications, presence), messages and JSON Schemas. Who receives
and who sends is not written down by hand: every route of every service's routing table
(`routes.py`, seedline_platform.routing) becomes a receive operation of the service, and
everything a route may send a send operation, each with the service's name and its queue
group or durable. A subject in a table that no channel of the contract carries is an error.
"""

from __future__ import annotations

import re
from typing import Any

from seedline_contracts import asyncapi as contract
from seedline_contracts import subjects
from seedline_platform.routing import Kind, Route, message_name

# Receive operations that are reads, not subscriptions (KV gets and the presence watch).
READS = {"receivePresence"}


def routing_tables() -> dict[str, tuple[Route, ...]]:
    """Each service's routing table under default settings: read, nothing started."""
    from seedline_continuity_resolver.routes import routes as resolver
    from seedline_platform.settings import Settings
    from seedline_runner_gateway.routes import routes as gateway
    from seedline_seed_composer.routes import routes as composer
    from seedline_timeline_writer.routes import routes as writer

    settings = Settings()
    return {"timeline-writer": writer(settings), "continuity-resolver": resolver(settings),
            "seed-composer": composer(settings), "runner-gateway": gateway(settings)}


def _pattern(address: str) -> re.Pattern[str]:
    """A contract address (with {parameters}) as a pattern of FastStream subjects (with *)."""
    parts = [r"(\*|[^.]+)" if p.startswith("{") else re.escape(p) for p in address.split(".")]
    return re.compile(r"\.".join(parts) + "$")


def _channel_for(subject: str) -> str:
    """The contract channel carrying `subject` (a subject, a filter, or a template with
    {parameters}); a filter ending in > is carried by the first channel under it."""
    if subject.endswith(".>"):
        wanted = subject.split(".")[:-1]
        for channel_id, (address, _, _) in contract.CHANNELS.items():
            tokens = (address or "").split(".")
            if len(tokens) > len(wanted) and all(
                    w == "*" or t.startswith("{") or w == t for w, t in zip(wanted, tokens)):
                return channel_id
    subject = re.sub(r"\{[^}]+\}", "*", subject)
    for channel_id, (address, _, _) in contract.CHANNELS.items():
        if address and _pattern(address).match(subject):
            return channel_id
    raise LookupError(f"{subject} is in a routing table but in no contract channel")


def sent_subject(sent: str) -> str:
    """What a route's `sends` names, as a subject: an event type is a session event."""
    return sent if "." in sent else subjects.session_event_filter(sent)


def _event_messages(subject: str, messages: list[str]) -> list[str]:
    """A subscriber on seedline.session.*.<type> receives only that event's message."""
    kind = subject.rsplit(".", 1)[-1]
    named = [m for m in messages if getattr(contract.events, m, None) is not None
             and contract.events.__dict__[m].__struct_config__.tag == kind]
    return named or messages


def receives() -> list[dict[str, Any]]:
    """Every subscription of every service's table: service, subject, route."""
    return [{"service": service, "subject": subject, "route": route}
            for service, table in routing_tables().items() for route in table
            if route.kind is not Kind.LOOP for subject in route.filters]


def sends() -> list[dict[str, Any]]:
    """Everything any route of any service may send: service, subject, route."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for service, table in routing_tables().items():
        for route in table:
            for sent in route.sends:
                found.setdefault((service, sent_subject(sent)),
                                 {"service": service, "subject": sent_subject(sent),
                                  "route": route})
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
                   "x-handler": route.handler, "x-consumer": route.kind.value,
                   "x-acknowledged": route.acknowledged})
        if route.kind in (Kind.REQUEST, Kind.MESSAGE):
            op["x-queue-group"] = receive["service"]
        if route.durable:
            op["x-durable"] = route.durable
        if route.message is not None:  # decoded at the edge; anything else is parked
            op["x-handler-takes"] = message_name(route.message)
        if route.sends:
            op["x-sends"] = [sent_subject(sent) for sent in route.sends]
        if route.kind is Kind.REQUEST:
            _with_reply(doc, op, receive["subject"])
        operations[f"{receive['service']}:{receive['subject']}"] = op
    for send in sends():
        route = send["route"]
        op = _operation(doc, "send", send["subject"], f"{send['service']} sends it "
                        f"({route.handler}).")
        op.update({"x-service": send["service"], "x-subject": send["subject"]})
        _with_reply(doc, op, send["subject"])  # a request to a machine is answered
        operations[f"{send['service']}>{send['subject']}"] = op
    doc["operations"] = dict(sorted(operations.items()))
    doc["info"]["description"] += (
        " Operations marked x-service (service:subject receives, service>subject sends) are "
        "generated from the services' routing tables (seedline_devtools.asyncapi_doc)."
    )
    return doc

