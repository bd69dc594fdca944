"""Composing a decision's brief through the reader port: what is read, budgets, replay."""

from __future__ import annotations

import msgspec

from seedline_contracts.codec import decode, encode
from seedline_contracts.events import SeedComposed
from seedline_core.brief import DEFAULT_BUDGET, BriefRow, Budget
from seedline_seed_composer.brief_of_decision import (
    brief_stats,
    compose_for,
    recompose,
    summary_record,
)

AT = "2026-08-17T10:00:00Z"


def receipt(brief, decided) -> SeedComposed:
    """The seed_composed the composer publishes, through the wire and back."""
    event = SeedComposed(session_id="csess_new", at=AT, brief=brief_stats(brief),
                         plan=decided.plan, text=brief.text, summary=summary_record(brief))
    return decode(encode(event), SeedComposed)


async def test_a_long_agent_run_gives_a_brief_that_holds_its_instruction(kit) -> None:
    rows = kit.agent_run(400)
    reader = kit.reader_of(rows)
    brief = await compose_for(kit.decision(401, 401), reader)
    assert brief is not None
    assert "Add castling to the move generator." in brief.text
    assert [e.seq for e in brief.entries if e.part == "instructions"] == [1]
    # One read of the record, one of the instructions, one count (the part exists).
    assert reader.calls == [("bd43f4de", "apps/chess-academy", 401, 61)]
    assert reader.kind_calls == [("bd43f4de", "apps/chess-academy", 401, 61, "chat_user")]
    assert reader.counts == [("bd43f4de", "apps/chess-academy", 401, "chat_user")]


async def test_a_record_that_leaves_nothing_out_reads_no_instructions(kit) -> None:
    reader = kit.reader_of(kit.agent_run(20))
    brief = await compose_for(kit.decision(21, 21), reader)
    assert brief is not None and brief.omitted_rows == 0
    assert reader.kind_calls == [] and reader.counts == []


async def test_instructions_all_inside_the_record_are_read_but_not_counted(kit) -> None:
    rows = [kit.row(seq, "t" * 3000) for seq in range(1, 6)]
    rows.append(kit.row(6, "go on", "chat_user"))
    reader = kit.reader_of(rows)
    brief = await compose_for(kit.decision(6, 6), reader)
    assert brief is not None and not brief.has_instructions_part
    assert len(reader.kind_calls) == 1 and reader.counts == []


async def test_clean_slate_and_force_fresh_read_nothing(kit) -> None:
    reader = kit.reader_of(kit.agent_run(50))
    assert await compose_for(kit.decision(51, 51, clean_slate=True), reader) is None
    assert await compose_for(kit.decision(51, 51, seed_source=None), reader) is None
    assert reader.calls == [] and reader.kind_calls == [] and reader.counts == []


async def test_malformed_rows_widen_the_read_instead_of_ending_the_record(kit) -> None:
    bogus = [BriefRow(seq, "csess_old", "bogus", "?", AT, None) for seq in range(2, 300)]
    rows = [kit.row(1, "the task", "chat_user"), *bogus, kit.row(300, "newest")]
    reader = kit.reader_of(rows)
    brief = await compose_for(kit.decision(300, 300), reader)
    assert brief is not None
    assert [e.seq for e in brief.entries] == [1, 300]
    assert brief.omitted_rows == 298
    assert [limit for *_, limit in reader.calls] == [61, 244, 976]


async def test_the_budget_is_used_and_recorded_in_the_receipt(kit) -> None:
    rows = kit.agent_run(400)
    small = await compose_for(kit.decision(401, 401), kit.reader_of(rows))
    large = await compose_for(kit.decision(401, 401), kit.reader_of(rows), Budget(120, 40_000))
    assert small is not None and large is not None
    assert large.rows > small.rows
    stats = brief_stats(large)
    assert (stats.budget.rows, stats.budget.chars) == (120, 40_000)
    assert msgspec.json.decode(encode(stats))["budget"] == {"rows": 120, "chars": 40_000}
    assert brief_stats(small).budget.rows == DEFAULT_BUDGET.rows


async def test_a_replay_uses_the_recorded_budget_whatever_the_setting_is_now(kit) -> None:
    rows = kit.agent_run(400)
    decided = kit.decision(401, 401)
    first = await compose_for(decided, kit.reader_of(rows), Budget(120, 40_000))
    assert first is not None
    recorded = receipt(first, decided)
    # The setting has changed since: composing now gives other bytes, the replay the same.
    now = await compose_for(decided, kit.reader_of(rows), Budget(30, 8_000))
    replayed = await recompose(decided, recorded, kit.reader_of(rows))
    assert now is not None and now.sha256 != first.sha256
    assert replayed is not None and replayed.sha256 == first.sha256 == recorded.brief.sha256
    assert replayed.text == recorded.text


async def test_a_receipt_without_a_budget_replays_with_the_default(kit) -> None:
    rows = kit.agent_run(100)
    decided = kit.decision(101, 101)
    first = await compose_for(decided, kit.reader_of(rows))
    old = receipt(first, decided)
    old.brief.budget = None  # a seed_composed from before budgets were recorded
    replayed = await recompose(decided, old, kit.reader_of(rows))
    assert replayed is not None and replayed.sha256 == first.sha256
