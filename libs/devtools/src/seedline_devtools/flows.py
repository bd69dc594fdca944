"""docs/flows.md: each flow of the platform drawn from the services' routing tables.

A flow starts where someone outside publishes or asks (a producer, a person, a machine,
a service's own sweep). From there each hop is found in the tables: the routes whose
subject takes what was sent, and what those routes may send in turn. A flow names the
messages it follows, so the drawing keeps to one story; whatever else a hop may send is
listed under the diagram. Nothing here knows which service does what: change a table and
the drawing changes (`seedline docs --out docs`; a test holds docs/flows.md to it).
"""

from __future__ import annotations

from dataclasses import dataclass

from seedline_contracts import channels, events, subjects
from seedline_platform.routing import Kind, Route, sent_name, sent_subject
from seedline_runner_gateway.reaper import Reaper

from .tables import routing_tables

MACHINE = "runner machine"
PEOPLE = "people (notify)"
STORED = "SEEDLINE_SESSIONS"


@dataclass(frozen=True)
class Flow:
    name: str
    story: str
    actor: str  # who starts it
    first: object  # the subject it starts with, or a LOOP route's handler
    follow: tuple[object, ...]  # what it follows: event types and channels, in any order


E = events
FLOWS = (
    Flow("Ingest", "A producer publishes an entry; it becomes the timeline once, in order, and "
         "every projection folds it.", "producer", subjects.INGEST_TIMELINE,
         (channels.TIMELINE,)),
    Flow("Open", "A person or an agent opens a conversation: a decision, a brief, a launch on "
         "the machine, and the reply to whoever asked.", "person", subjects.API_SESSIONS_OPEN,
         (E.ContinuityDecided, E.SeedComposed, channels.RUNNER_LAUNCH, E.Opened)),
    Flow("Wake", "A person's message to a repo whose conversation is stopped wakes it: the "
         "same decision, brief and launch as an open, with nobody waiting.", "person",
         subjects.INGEST_TIMELINE,
         (channels.TIMELINE, E.WakeRequested, E.ContinuityDecided, E.SeedComposed,
          channels.RUNNER_LAUNCH, E.Opened)),
    Flow("Relocate", "A conversation moves to another machine: the old engine is stopped "
         "before the new machine is sent the launch.", "person", subjects.API_SESSIONS_RELOCATE,
         (E.ContinuityDecided, E.SeedComposed, channels.RUNNER_STOP, channels.RUNNER_LAUNCH,
          E.Relocated)),
    Flow("Stop", "A person stops a live conversation: the machine ends the engine, then the "
         "stop is recorded.", "person", subjects.API_SESSIONS_STOP,
         (channels.RUNNER_STOP, E.Stopped)),
    Flow("Idle stop", "A conversation idle past SEEDLINE_IDLE_STOP_MINUTES is stopped and "
         "its people told.", "runner-gateway", Reaper.run,
         (channels.RUNNER_STOP, E.Reaped, channels.NOTIFY)),
    Flow("Resume lost", "A machine finds, after the launch, that its engine did not continue "
         "its own conversation: the record is corrected and the people told.", MACHINE,
         channels.RUNNER_EVENTS.address, (E.ResumeLost, channels.NOTIFY)),
)


@dataclass(frozen=True)
class Hop:
    sender: str
    receiver: str
    message: str  # what travels
    route: Route | None = None  # the route that takes it (None outside the platform)

    @property
    def handler(self) -> str:
        return self.route.handler_name if self.route is not None else ""


def _receivers(tables: dict[str, tuple[Route, ...]], subject: str) -> list[tuple[str, Route]]:
    concrete = subject.replace("{node}", "n").replace("{instance}", "i")
    return [(service, route) for service, table in tables.items() for route in table
            if route.kind is not Kind.LOOP
            and any(_may_match(concrete, f) for f in route.filters)]


def _may_match(subject: str, filter_subject: str) -> bool:
    """Whether `filter_subject` takes some subject that `subject` stands for: its wildcards
    and {parameter} tokens may be any value (a timeline entry of any kind may be a person's
    message)."""
    tokens, wanted = subject.split("."), filter_subject.split(".")
    for i, want in enumerate(wanted):
        if want == ">" or (i < len(tokens) and tokens[i] == ">"):
            return len(tokens) > i
        if i >= len(tokens):
            return False
        token = tokens[i]
        if not (token == want or want == "*" or token == "*" or token.startswith("{")):
            return False
    return len(tokens) == len(wanted)


def _label(sent) -> str:
    if isinstance(sent, str):
        return sent
    name = sent_name(sent)
    return name if isinstance(sent, channels.Channel) else f"{name} (SEEDLINE_SESSIONS)"


def _subject(sent) -> str:
    return sent if isinstance(sent, str) else sent_subject(sent)


def hops(flow: Flow, tables: dict[str, tuple[Route, ...]] | None = None) -> list[Hop]:
    """The flow's hops in order, breadth first from where it starts."""
    tables = routing_tables() if tables is None else tables
    out: list[Hop] = []
    queue: list[tuple[str, object]] = []  # (sender, what it sent)
    loops = [(s, r) for s, t in tables.items() for r in t
             if r.kind is Kind.LOOP and r.handler is flow.first]
    if loops:
        (service, route), = loops
        queue += [(service, sent) for sent in route.sends if sent in flow.follow]
    else:
        queue.append((flow.actor, flow.first))
    seen: set[tuple[str, object]] = set()
    while queue:
        sender, sent = queue.pop(0)
        if (sender, sent) in seen:
            continue
        seen.add((sender, sent))
        subject = _subject(sent)
        if subject.startswith("seedline.runner.") and not subject.endswith(".events"):
            out.append(Hop(sender, MACHINE, _label(sent)))
            continue
        if subject.startswith("seedline.notify."):
            out.append(Hop(sender, PEOPLE, _label(sent)))
            continue
        taken = [(service, route) for service, route in _receivers(tables, subject)
                 # Projections fold every event; the ingest flow shows them.
                 if route.kind is not Kind.BATCH or route.sends or flow.name == "Ingest"]
        if not taken:  # recorded, and only folded by the projections
            out.append(Hop(sender, STORED, sent))
        for service, route in taken:
            out.append(Hop(sender, service, _label(sent), route))
            queue += [(service, nxt) for nxt in route.sends if nxt in flow.follow]
    return out


def _participant(name: str) -> str:
    return name.replace(" ", "_").replace("(", "").replace(")", "").replace("-", "_")


def mermaid(found: list[Hop]) -> str:
    actors: list[str] = []
    for hop in found:
        for name in (hop.sender, hop.receiver):
            if name not in actors:
                actors.append(name)
    lines = ["```mermaid", "sequenceDiagram"]
    lines += [f"    participant {_participant(a)} as {a}" for a in actors]
    for hop in found:
        via = f" → {hop.handler}" if hop.handler else ""
        lines.append(f"    {_participant(hop.sender)}->>{_participant(hop.receiver)}: "
                     f"{hop.message}{via}")
    lines.append("```")
    return "\n".join(lines)


def flows_markdown(tables: dict[str, tuple[Route, ...]] | None = None) -> str:
    tables = routing_tables() if tables is None else tables
    parts = [
        "# Flows",
        "",
        "Generated from the services' routing tables (`services/*/src/*/routes.py`) by "
        "`seedline docs --out docs`; do not edit. Each arrow is a message and the route that "
        "takes it (`service → handler`). Session events travel on SEEDLINE_SESSIONS; the "
        "projections that fold every event (each service's `apply_sessions`, "
        "`apply_timeline`) are drawn in the ingest flow only.",
        "",
    ]
    for flow in FLOWS:
        found = hops(flow, tables)
        parts += [f"## {flow.name}", "", flow.story, "", mermaid(found), ""]
        others = sorted({f"{_label(sent)} ({hop.handler})"
                         for hop in found if hop.route is not None
                         for sent in hop.route.sends if sent not in flow.follow})
        if others:
            parts += ["Also possible on the way: " + ", ".join(others) + ".", ""]
    return "\n".join(parts).rstrip() + "\n"
