"""The seed-composer's handlers: compose a brief for each decision, serve the latest one."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec
from nats.aio.msg import Msg

from seedline_contracts.errors import ErrorReply, error_reply
from seedline_contracts.events import ContinuityDecided, SeedComposed
from seedline_contracts.sessions import BriefGetReply, BriefGetRequest
from seedline_contracts.tokens import name_problem
from seedline_core.brief import DEFAULT_BUDGET, FRAMING, Budget
from seedline_core.notices import error_message
from seedline_platform.erasure import Forgotten
from seedline_platform.logging import get_logger
from seedline_platform.publishing import event_message

from .brief_of_decision import brief_stats, compose_for, summary_record
from .summary import Summarizer

if TYPE_CHECKING:
    from .bootstrap import Ports

log = get_logger(__name__)


class Composer:
    """Handles continuity_decided events and briefs.get requests."""

    def __init__(self, ports: Ports, budget_for: Callable[[str], Budget] = lambda engine:
                 DEFAULT_BUDGET, summarizer: Summarizer | None = None,
                 forgotten: Forgotten | None = None) -> None:
        self._publisher = ports.publisher
        # The erasures this copy has taken in: a wake by a forgotten message is not briefed,
        # and no brief row of one is kept (seedline_platform.erasure.Forgotten).
        self._forgotten = forgotten or Forgotten()
        self.reader = ports.reader
        self._store = ports.store
        self._recorded = ports.recorded
        self._clock = ports.clock
        # Brief text is stored sealed with its instance's key, in the event and the table.
        self._sealer = ports.sealer
        self._budget_for = budget_for  # an engine's brief budget (SEEDLINE_BRIEF_BUDGETS)
        self._summarizer = summarizer
        self._rows = ports.metrics.histogram(
            "seedline_brief_rows", "Entries kept in each brief offered.", [],
            buckets=(0, 5, 10, 20, 30, 40, 50, 60, 100, 200))
        self._chars = ports.metrics.histogram(
            "seedline_brief_chars", "Characters of entry text in each brief offered.", [],
            buckets=(0, 1_000, 2_000, 4_000, 8_000, 12_000, 20_000, 40_000))

    async def handle_decision(self, decision: ContinuityDecided, msg: Msg) -> None:
        decided_seq = msg.metadata.sequence.stream
        if msg.metadata.num_delivered > 1 and await self._answered_before(decision, decided_seq):
            return
        if self._forgotten_wake(decision):
            return
        budget = self._budget_for(decision.plan.engine)
        brief = await compose_for(decision, self.reader, budget, self._summarizer)
        instance = decision.plan.instance_id
        text = await self._sealer.seal(instance, brief.text) if brief else None
        summary = summary_record(brief) if brief else None
        if summary is not None:
            summary = msgspec.structs.replace(
                summary, text=await self._sealer.seal(instance, summary.text))
        # The receipt records the budget, the text and any summary, so the launch is
        # made from this event alone and a replay rebuilds these bytes whatever the
        # settings are by then.
        event = SeedComposed(
            session_id=decision.session_id,
            at=self._clock(),
            brief=brief_stats(brief) if brief else None,
            plan=decision.plan,
            text=text,
            summary=summary,
            decided_seq=decided_seq,
            redaction=brief.redaction if brief else None,
            framing=FRAMING if brief else None,
        )
        # The msg id makes a redelivered decision publish its seed_composed once.
        await self._publisher.publish([event_message(event, f"seed_composed:{decided_seq}")])
        # Kept for briefs.get after the launch is on its way: the event is the record,
        # and briefs.get reads the event itself until this row is there.
        if brief is not None and text is not None:
            async with self._forgotten.folding():  # not after this copy dropped its rows
                if not self._forgotten_wake(decision):
                    await self._store.keep(decision.session_id, decided_seq, BriefGetReply(
                        text, brief.rows, brief.chars, brief.omitted_rows, brief.until_seq,
                        brief.sha256))
            self._rows.observe(brief.rows)
            self._chars.observe(brief.chars)
        log.info("seed_composed", session_id=decision.session_id, rows=brief.rows if brief else 0)

    def _forgotten_wake(self, decision: ContinuityDecided) -> bool:
        plan = decision.plan
        if not self._forgotten.covers(plan.instance_id, plan.wake_seq):
            return False
        log.info("forgotten_not_briefed", session_id=decision.session_id)
        return True

    async def _answered_before(self, decision: ContinuityDecided, decided_seq: int) -> bool:
        """A redelivered decision whose seed_composed is recorded keeps those bytes: the
        settings or a summary's model may have changed since, and the launch and the
        receipt are already made from the recorded ones."""
        recorded = await self._recorded(decision.session_id)
        if recorded is None or recorded.decided_seq != decided_seq:
            return False
        kept = _reply_of(recorded)
        if kept is not None:
            await self._store.keep(decision.session_id, decided_seq, kept)
        return True

    async def get_brief(self, request: BriefGetRequest) -> BriefGetReply | ErrorReply:
        if name_problem(request.session_id):
            return error_reply(
                "invalid_request", error_message("invalid_request", field="session_id"))
        brief = await self._store.latest(request.session_id)
        if brief is None:
            brief = _reply_of(await self._recorded(request.session_id))
        text = None if brief is None else await self._sealer.open_or_none(None, brief.text)
        if brief is None or text is None:
            return error_reply(
                "not_found", error_message("not_found", what="brief for that conversation"))
        return msgspec.structs.replace(brief, text=text)


def _reply_of(composed: SeedComposed | None) -> BriefGetReply | None:
    if composed is None or composed.brief is None or composed.text is None:
        return None
    b = composed.brief
    return BriefGetReply(composed.text, b.rows, b.chars, b.omitted_rows, b.until_seq, b.sha256)
