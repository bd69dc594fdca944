"""Turn a continuity decision into a brief: read, compose (pure), and replay a recorded one."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Iterator

from seedline_contracts.events import ContinuityDecided, LaunchPlan, SeedComposed
from seedline_contracts.sessions import BriefBudget, BriefStats, BriefSummary
from seedline_core.brief import (
    DEFAULT_BUDGET,
    FRAMING,
    INSTRUCTION_ROWS,
    SUMMARY_MAX_CHARS,
    Brief,
    BriefRow,
    Budget,
    CarriedTree,
    Framing,
    Summary,
    compose_brief,
    usable_budget,
)
from seedline_core.brief_rows import redacted_row
from seedline_core.redaction import RULESET

from .reader import TimelineReader
from .summary import Summarizer

INSTRUCTION_KIND = "chat_user"
# How many of the entries a brief leaves out (the newest of them) a summary is made from.
SUMMARY_INPUT_ROWS = 200


class _Window:
    """The newest rows (of one kind, or all), read in a window that widens when a walk
    reads all of it: the walk is pure and synchronous, so it is given what was read."""

    def __init__(self, read: Callable[[int], Awaitable[list[BriefRow]]], first: int, lazy: bool):
        self._read = read
        self._first = first
        # A lazy window reads nothing until a walk asks for a row.
        self.limit = 0 if lazy else first
        self._fetched = 0
        self.rows: list[BriefRow] = []
        self._exhausted = False

    async def ready(self) -> None:
        if self.limit != self._fetched:
            self.rows = await self._read(self.limit)
            self._fetched = self.limit

    def walk(self) -> Iterator[BriefRow]:
        self._exhausted = False
        yield from self.rows
        self._exhausted = True

    def widen(self) -> bool:
        """Whether the last walk wanted more rows than were read; if so, read more next time."""
        if not self._exhausted or len(self.rows) < self.limit:
            return False
        self.limit = self.limit * 4 if self.limit else self._first
        return True


class _Composition:
    """One decision's brief, composed as often as needed from rows read once."""

    def __init__(
        self, decision: ContinuityDecided, reader: TimelineReader, budget: Budget,
        redaction: int | None = RULESET, framing: int | None = FRAMING,
    ):
        plan = decision.plan
        self._decision = decision
        self._redaction = redaction
        self._framing = framing_of(plan, framing)
        self._reader = reader
        self.budget = usable_budget(budget)
        until = decision.until_seq

        def read(kind: str | None) -> Callable[[int], Awaitable[list[BriefRow]]]:
            return lambda limit: reader.newest_first(
                plan.instance_id, plan.repo, until, limit, kind
            )

        # The record walk reads one row past its last kept one, and the instructions walk
        # reads those inside the record and one more, or the part's ten and one more.
        self._record = _Window(read(None), self.budget.rows + 1, lazy=False)
        first = max(self.budget.rows, INSTRUCTION_ROWS) + 1
        self._instructions = _Window(read(INSTRUCTION_KIND), first, lazy=True)
        self._instructions_upto: int | None = None

    async def brief(self, summary: Summary | None = None) -> Brief | None:
        decision = self._decision
        while True:
            await self._record.ready()
            await self._instructions.ready()
            brief = compose_brief(
                self._record.walk(), decision.until_seq, decision.entries_upto,
                self._instructions.walk(), self._instructions_upto or 0, self.budget, summary,
                self._redaction, self._framing,
            )
            widened = [self._record.widen(), self._instructions.widen()]
            if any(widened):
                continue
            # Only a brief with an instructions part says how many instructions it leaves
            # out, so only then are they counted.
            counted = self._instructions_upto is not None
            if brief is not None and brief.has_instructions_part and not counted:
                plan = decision.plan
                self._instructions_upto = await self._reader.count(
                    plan.instance_id, plan.repo, decision.until_seq, INSTRUCTION_KIND
                )
                continue
            return brief


def _offers_brief(decision: ContinuityDecided) -> bool:
    plan = decision.plan
    return not (plan.clean_slate or decision.seed_source is None or decision.until_seq is None)


async def compose_for(
    decision: ContinuityDecided,
    reader: TimelineReader,
    budget: Budget = DEFAULT_BUDGET,
    summarizer: Summarizer | None = None,
) -> Brief | None:
    """The brief a decision offers, or None. clean_slate and force_fresh read nothing.

    With a summarizer, entries the brief leaves out are summarised by a model and the
    summary is shown, labelled; a summary that cannot be had leaves the brief as it is.
    """
    if not _offers_brief(decision):
        return None
    composition = _Composition(decision, reader, budget)
    brief = await composition.brief()
    if brief is None or summarizer is None or brief.omitted_rows == 0:
        return brief
    left_out = await _left_out(decision, reader, brief)
    text = await summarizer.summarize(left_out) if left_out else None
    if not text:
        return brief
    summary = Summary(
        model=summarizer.model,
        text=text[:SUMMARY_MAX_CHARS],
        entries=len(left_out),
        first_seq=left_out[-1].seq,
        last_seq=left_out[0].seq,
    )
    return await composition.brief(summary)


async def _left_out(
    decision: ContinuityDecided, reader: TimelineReader, brief: Brief
) -> list[BriefRow]:
    """The newest entries older than the record that the instructions part does not hold,
    secrets left out: the summary's model is often another vendor's."""
    plan = decision.plan
    held = {entry.seq for entry in brief.entries}
    rows = await reader.newest_first(
        plan.instance_id, plan.repo, brief.oldest_in_record - 1, SUMMARY_INPUT_ROWS
    )
    return [redacted_row(row) for row in rows if row.seq not in held]


async def recompose(
    decision: ContinuityDecided, composed: SeedComposed, reader: TimelineReader
) -> Brief | None:
    """The brief a recorded seed_composed offered, rebuilt from the timeline with the
    recorded budget, summary and secret detectors: no setting and no model is consulted."""
    if not _offers_brief(decision):
        return None
    stats = composed.brief
    recorded = stats.budget if stats is not None else None
    # A seed_composed without a budget predates budgets: it used the default one.
    budget = Budget(recorded.rows, recorded.chars) if recorded is not None else DEFAULT_BUDGET
    summary = None
    if composed.summary is not None:
        record = composed.summary
        summary = Summary(record.model, record.text, record.entries, record.first_seq,
                          record.last_seq)
    return await _Composition(decision, reader, budget, composed.redaction,
                              composed.framing).brief(summary)


def framing_of(plan: LaunchPlan, version: int | None) -> Framing:
    """How the brief of this launch opens, as the framing `version` did it (a replay uses
    the recorded one): from version 2 a relocation is said as one, and what was saved of
    the working tree on the machine the work came from is named (CONTRACT.md 5)."""
    if not version or version < 2:
        return Framing()
    carried = None
    if plan.carry is not None:
        tree = plan.carry.worktree
        carried = CarriedTree(
            from_label=plan.carry.label, base_commit=tree.base_commit, branch=tree.branch,
            clean=tree.clean, files=tree.snapshot.files if tree.snapshot else 0,
            saved=tree.snapshot is not None, over_limit=tree.over_limit,
            left_out=tuple(item.path for item in tree.left_out))
    return Framing(relocated=plan.relocation, carried=carried)


def brief_stats(brief: Brief) -> BriefStats:
    """The wire receipt of a brief, with the budget it was composed with."""
    budget = BriefBudget(rows=brief.budget.rows, chars=brief.budget.chars)
    return BriefStats(**brief.stats(), budget=budget)


def summary_record(brief: Brief) -> BriefSummary | None:
    summary = brief.summary
    if summary is None:
        return None
    return BriefSummary(
        model=summary.model,
        sha256=hashlib.sha256(summary.text.encode("utf-8")).hexdigest(),
        text=summary.text,
        entries=summary.entries,
        first_seq=summary.first_seq,
        last_seq=summary.last_seq,
    )
