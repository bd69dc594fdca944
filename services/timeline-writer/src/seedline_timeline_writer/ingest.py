"""A batch from SEEDLINE_INGEST: append what is valid and permitted, reject the rest.

Two kinds of producer publish there (CONTRACT.md 2.1 and 6): trusted ones on
``seedline.ingest.timeline``, and runner machines on ``seedline.ingest.runner.<node>``,
whose entries are accepted only for a conversation launched on that node and never
as ``chat_user`` (a person's words never come from a machine). Refused input is never
lost: it goes to SEEDLINE_REJECTED with its reason and the message is acknowledged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nats.aio.msg import Msg

from seedline_contracts import subjects
from seedline_contracts.codec import encode
from seedline_contracts.normalise import Accepted, Refusal, normalise, rejected_record
from seedline_contracts.timeline import TimelineEntry
from seedline_platform.logging import get_logger
from seedline_platform.observability import context_from

from .launches import Launch, LaunchCheck
from .writer import TimelineWriter

if TYPE_CHECKING:
    from .bootstrap import Ports

log = get_logger(__name__)

@dataclass(frozen=True)
class _Candidate:
    msg: Msg
    entry: TimelineEntry
    node: str | None


class IngestHandler:
    def __init__(self, writer: TimelineWriter, launches: LaunchCheck, ports: Ports) -> None:
        self._writer = writer
        self._launches = launches
        self._rejects = ports.publisher
        self._clock = ports.clock
        self._tracer = ports.tracer
        self._rejected = ports.metrics.counter(
            "seedline_ingest_rejected_total", "Ingest input refused, by reason.",
            ["reason_code"])

    async def handle(self, msgs: Sequence[Msg]) -> None:
        received_at = self._clock()
        candidates: list[_Candidate] = []
        refused: list[tuple[Msg, Refusal]] = []
        for msg in msgs:
            result = normalise(msg.data, received_at)
            origin = subjects.ingest_origin(msg.subject)
            if isinstance(result, Accepted) and origin is not None and origin.instance_id not in (
                None, result.entry.instance_id
            ):
                # Partitions follow the subject's instance: an entry of another instance
                # there would lose its order against the rest of its own instance.
                result = Refusal("invalid_entry", (
                    f"instance_id {result.entry.instance_id!r} is not the instance the subject "
                    f"names ({origin.instance_id!r}); publish it to its own instance's subject"
                ))
            if isinstance(result, Accepted):
                node = "" if origin is None else origin.runner_node
                candidates.append(_Candidate(msg, result.entry, node))
            else:
                refused.append((msg, result))
        accepted, not_permitted = await self._check_runner_entries(candidates)
        refused += not_permitted
        # A span per entry that came with a trace, so one open is one trace through here too.
        spans = [
            self._tracer.start_span("timeline-writer append", context=context_from(c.msg.headers),
                                    attributes={"seedline.entry_id": c.entry.entry_id})
            for c in candidates if c.msg.headers and "traceparent" in c.msg.headers
        ]
        try:
            if accepted:
                await self._writer.append_entries(accepted)
        finally:
            for span in spans:
                span.end()
        if refused:
            await self._rejects.publish([
                (subjects.REJECTED_TIMELINE,
                 encode(rejected_record(refusal, msg.data, received_at,
                                        msg.metadata.sequence.stream)), None)
                for msg, refusal in refused
            ])
            for _, refusal in refused:
                self._rejected.labels(refusal.reason_code).inc()
            log.info("ingest_rejected", count=len(refused))

    async def _check_runner_entries(
        self, candidates: list[_Candidate]
    ) -> tuple[list[TimelineEntry], list[tuple[Msg, Refusal]]]:
        asked = {
            Launch(c.node, c.entry.instance_id, c.entry.repo, c.entry.session_id)
            for c in candidates if c.node and c.entry.kind != "chat_user"
        }
        permitted = await self._launches.permitted(asked) if asked else set()
        accepted: list[TimelineEntry] = []
        refused: list[tuple[Msg, Refusal]] = []
        for c in candidates:
            if c.node is None:
                accepted.append(c.entry)
                continue
            problem = _runner_problem(c, permitted)
            if problem is None:
                accepted.append(c.entry)
            else:
                refused.append((c.msg, Refusal("not_permitted", problem)))
        return accepted, refused


def _runner_problem(c: _Candidate, permitted: set[Launch]) -> str | None:
    if not c.node:
        return "the subject does not name a machine; publish to seedline.ingest.runner.<node>"
    if c.entry.kind == "chat_user":
        return (
            "a machine may not publish chat_user entries: those are a person's words; "
            "publish them to seedline.ingest.timeline from the person's side"
        )
    if Launch(c.node, c.entry.instance_id, c.entry.repo, c.entry.session_id) not in permitted:
        return (
            f"conversation {c.entry.session_id} of {c.entry.repo} was never launched on "
            f"machine {c.node}; a machine publishes only the conversations it was given"
        )
    return None
