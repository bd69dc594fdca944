"""The person's instructions part of a brief and per-engine budgets (CONTRACT.md 5, 1.1)."""

import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seedline_core.brief import (
    DEFAULT_BUDGET,
    MAX_OVERHEAD,
    PREAMBLE,
    Brief,
    BriefRow,
    Budget,
    Summary,
    compose_brief,
)
from seedline_core.brief_layout import INSTRUCTIONS_NOTE
from seedline_core.notices import wording_violations

AT = "2026-08-17T10:00:00Z"
OPEN = "== the person's instructions, newest last =="
CLOSE = "== end of the instructions =="
DIGESTS = Path(__file__).parent / "data" / "brief_1_0_digests.json"


def row(seq: int, content: str = "ok", kind: str = "terminal", session_id: str = "csess_a",
        at: str = AT) -> BriefRow:
    return BriefRow(seq=seq, session_id=session_id, kind=kind, content=content, at=at,
                    engine=None if kind == "chat_user" else "claude")


def ask(seq: int, content: str, **over) -> BriefRow:
    return row(seq, content, kind="chat_user", **over)


def compose(oldest_first: Sequence[BriefRow], budget: Budget = DEFAULT_BUDGET,
            earlier: int = 0) -> Brief:
    """The brief of a whole timeline, read as the composer reads it: both kinds newest first."""
    newest_first = list(reversed(oldest_first))
    instructions = [r for r in newest_first if r.kind == "chat_user"]
    brief = compose_brief(newest_first, newest_first[0].seq, len(oldest_first) + earlier,
                          instructions, len(instructions), budget)
    assert brief is not None
    return brief


def agent_run(tool_rows: int, first: str = "Add castling to the move generator.",
              tool_chars: int = 300) -> list[BriefRow]:
    """One instruction, then a long run of commands and their output."""
    rows = [ask(1, first)]
    for seq in range(2, tool_rows + 2):
        kind = "command" if seq % 2 else "terminal"
        rows.append(row(seq, f"{kind} {seq} " + "x" * tool_chars, kind=kind))
    return rows


def part_of(brief: Brief) -> str:
    """The text between the marker lines, or '' when there is no part."""
    match = re.search(rf"^{re.escape(OPEN)}\n(.*?)^{re.escape(CLOSE)}\n", brief.text,
                      re.MULTILINE | re.DOTALL)
    return match.group(1) if match else ""


def record_of(brief: Brief) -> str:
    return brief.text.split(f"{CLOSE}\n", 1)[-1]


def places(brief: Brief, part: str) -> list[int]:
    return [entry.seq for entry in brief.entries if entry.part == part]


class Strict:
    """Yields rows and fails the test when read past `allowed` rows."""

    def __init__(self, rows: Sequence[object], allowed: int) -> None:
        self.rows = list(rows)
        self.allowed = allowed
        self.read = 0

    def __iter__(self) -> Iterator[object]:
        for item in self.rows:
            if self.read >= self.allowed:
                raise AssertionError(f"read row {self.read + 1}, only {self.allowed} needed")
            self.read += 1
            yield item


# No part when the record holds every instruction: the 1.0 bytes, exactly


def _digest_cases() -> list[dict]:
    doc = json.loads(DIGESTS.read_text(encoding="utf-8"))
    kinds, ats, fills = doc["kinds"], doc["ats"], doc["fills"]
    for case in doc["cases"]:
        case["built"] = [
            BriefRow(seq, f"csess_{c}", kinds[k], fills[f] * length, ats[a], "claude")
            for seq, c, k, length, f, a in case["rows"]
        ]
    return doc["cases"]


DIGEST_CASES = _digest_cases()


def test_the_digests_cover_briefs_with_and_without_an_instructions_part() -> None:
    parts = [bool(part_of(compose(c["built"], earlier=c["earlier"]))) for c in DIGEST_CASES]
    assert 30 <= parts.count(False) and 30 <= parts.count(True)


@pytest.mark.parametrize("case", DIGEST_CASES, ids=lambda c: c["sha256"][:8])
def test_without_a_part_the_bytes_are_those_of_the_rule_before_it(case: dict) -> None:
    rows = case["built"]
    # Without an instructions source the walk is the 1.0 one in every case.
    old = compose_brief(list(reversed(rows)), rows[-1].seq, len(rows) + case["earlier"])
    assert old is not None and old.sha256 == case["sha256"]
    brief = compose(rows, earlier=case["earlier"])
    oldest = min(e.seq for e in old.entries)
    if all(r.seq >= oldest for r in rows if r.kind == "chat_user"):
        assert brief.text == old.text and brief.sha256 == case["sha256"]
        assert OPEN not in brief.text and INSTRUCTIONS_NOTE not in brief.text
    else:
        assert brief.sha256 != case["sha256"]
        assert part_of(brief)


def test_a_record_that_holds_the_only_instruction_has_no_part() -> None:
    brief = compose(agent_run(20))
    assert places(brief, "record")[0] == 1
    assert OPEN not in brief.text and CLOSE not in brief.text
    assert brief.text.startswith(PREAMBLE) and INSTRUCTIONS_NOTE not in brief.text


def test_the_instructions_are_not_read_when_the_record_leaves_nothing_out() -> None:
    rows = agent_run(20)
    newest_first = rows[::-1]
    instructions = Strict([r for r in newest_first if r.kind == "chat_user"], allowed=0)
    brief = compose_brief(newest_first, 21, 21, instructions, 1)
    assert brief is not None and instructions.read == 0


# The part: where it goes, what it says


def test_a_long_agent_run_keeps_the_instruction_that_started_it() -> None:
    brief = compose(agent_run(400))
    assert places(brief, "instructions") == [1]
    assert "Add castling to the move generator." in part_of(brief)
    assert places(brief, "record")[-1] == 401
    assert brief.text.index(CLOSE) < brief.text.index("\n== conversation csess_a ==")
    assert wording_violations(brief.text) == []


def test_the_marker_lines_are_whole_lines_in_order_before_the_record() -> None:
    brief = compose(agent_run(400))
    lines = brief.text.split("\n")
    assert lines.count(OPEN) == 1 and lines.count(CLOSE) == 1
    assert lines.index(OPEN) < lines.index(CLOSE) < lines.index("== conversation csess_a ==")
    assert brief.text.startswith(PREAMBLE + INSTRUCTIONS_NOTE)


def test_the_preamble_frames_the_part_as_the_persons_instructions_older_or_inside() -> None:
    for phrase in ("the person's own messages", "oldest first", "older than the record",
                   "inside it", "one-line reference", "background"):
        assert phrase in INSTRUCTIONS_NOTE
    assert OPEN in INSTRUCTIONS_NOTE and CLOSE in INSTRUCTIONS_NOTE
    assert wording_violations(INSTRUCTIONS_NOTE) == []


def test_an_instruction_held_in_the_part_is_one_reference_line_in_the_record() -> None:
    rows = agent_run(300) + [ask(302, "Now en passant too."), row(303, "done", kind="terminal")]
    brief = compose(rows)
    assert places(brief, "instructions") == [1, 302]
    assert places(brief, "reference") == [302]
    assert brief.text.count("Now en passant too.") == 1
    assert "Now en passant too." in part_of(brief)
    reference = "[302 user 10:00] (in the person's instructions above)\n"
    assert record_of(brief).count(reference) == 1
    # The record stays contiguous: the reference sits between its neighbours.
    record = record_of(brief)
    assert record.index("[301 command") < record.index(reference) < record.index("[303 terminal")


def test_the_record_is_contiguous_up_to_the_newest_entry() -> None:
    brief = compose(agent_run(300) + [ask(302, "And tests.")])
    in_record = sorted(places(brief, "record") + places(brief, "reference"))
    assert in_record == list(range(in_record[0], 303))


def test_rows_and_chars_count_both_parts_and_omitted_counts_neither() -> None:
    rows = agent_run(300, first="t" * 50)
    brief = compose(rows, earlier=7)
    kept = places(brief, "instructions") + places(brief, "record")
    assert brief.rows == len(kept)
    assert brief.chars == sum(e.chars for e in brief.entries if e.part != "reference")
    assert brief.omitted_rows == len(rows) + 7 - brief.rows
    assert f"[{brief.omitted_rows:,} earlier entries are not included]" in brief.text


def test_the_parts_share_the_budget() -> None:
    rows = agent_run(300, first="q" * 900, tool_chars=5000)
    for budget in (DEFAULT_BUDGET, Budget(11, 3200), Budget(120, 40_000)):
        brief = compose(rows, budget)
        assert brief.rows <= budget.rows and brief.chars <= budget.chars
        assert places(brief, "instructions") == [1]
        assert len(brief.text) - brief.chars <= MAX_OVERHEAD
        assert brief.budget == budget


# The part's limits: 10 entries, 3,000 characters, each cut to its head at 1,000


def _many_instructions(count: int, length: int = 20) -> list[BriefRow]:
    rows = [ask(seq, f"instruction {seq:02d} " + "i" * length) for seq in range(1, count + 1)]
    return rows + [row(seq, "t" * 3000) for seq in range(count + 1, count + 11)]


def test_at_most_ten_instructions_and_a_line_for_the_earlier_ones() -> None:
    brief = compose(_many_instructions(15))
    assert places(brief, "instructions") == list(range(6, 16))
    part = part_of(brief)
    assert part.startswith("[5 earlier instructions are not included]\n")
    assert "instruction 05" not in brief.text


def test_the_earlier_instructions_line_is_singular_for_one_and_absent_for_none() -> None:
    one = compose(_many_instructions(11))
    assert part_of(one).startswith("[1 earlier instruction is not included]\n")
    none = compose(_many_instructions(10))
    assert places(none, "instructions") == list(range(1, 11))
    assert "earlier instruction" not in none.text


def test_an_instruction_in_the_record_but_not_the_part_is_not_counted_as_left_out() -> None:
    # The task, three long tool rows, then twelve short instructions: the part holds the
    # newest ten, the record shows 5 and 6 in full, and only the task is left out.
    rows = [ask(1, "the task")] + [row(seq, "t" * 4000) for seq in (2, 3, 4)]
    rows += [ask(seq, f"step {seq}") for seq in range(5, 17)]
    brief = compose(rows)
    assert places(brief, "instructions") == list(range(7, 17))
    assert [5, 6] == [s for s in places(brief, "record") if s in (5, 6)]
    assert part_of(brief).startswith("[1 earlier instruction is not included]\n")
    assert "the task" not in brief.text


def test_each_instruction_is_cut_to_its_head_at_1000_characters() -> None:
    rows = [ask(1, "HEAD" + "h" * 1492 + "TAIL")] + agent_run(300)[1:]
    brief = compose(rows)
    part = part_of(brief)
    assert "HEAD" in part and "TAIL" not in brief.text
    assert f"HEAD{'h' * 996}\n[… 500 characters left out …]\n" in part
    assert [e.chars for e in brief.entries if e.part == "instructions"] == [1000]


def test_at_most_3000_characters_the_last_cut_to_what_remains() -> None:
    rows = [ask(seq, chr(ord("a") + seq) * 900) for seq in range(1, 6)]
    rows += [row(seq, "t" * 4000) for seq in range(6, 10)]
    brief = compose(rows)
    # 5, 4 and 3 take 2,700; 2 is cut to the 300 left and ends the walk.
    assert places(brief, "instructions") == [2, 3, 4, 5]
    kept = {e.seq: e for e in brief.entries if e.part == "instructions"}
    assert sum(e.chars for e in kept.values()) == 3000
    assert kept[2].chars == 300 and kept[2].left_out == 600
    assert "[1 earlier instruction is not included]" in part_of(brief)


def test_less_than_200_characters_of_room_stops_the_part_before_the_entry() -> None:
    rows = [ask(1, "the small first task"), ask(2, "w" * 500), ask(3, "m" * 850),
            ask(4, "m" * 1000), ask(5, "m" * 1000)]
    rows += [row(seq, "t" * 4000) for seq in range(6, 10)]
    brief = compose(rows)
    # 150 characters are left for entry 2's 500: it is not cut, and the walk stops there
    # rather than skipping to the smaller, older entry 1.
    assert places(brief, "instructions") == [3, 4, 5]
    assert "the small first task" not in brief.text and "w" * 150 not in brief.text
    assert part_of(brief).startswith("[2 earlier instructions are not included]\n")


def test_malformed_instruction_rows_are_passed_over() -> None:
    rows = agent_run(300)
    newest_first = rows[::-1]
    bad = [None, "x", row(5, "not an instruction", kind="terminal"), ask(10**30, "no")]
    instructions = [*bad, *[r for r in newest_first if r.kind == "chat_user"]]
    brief = compose_brief(newest_first, 301, 301, instructions, 1)
    assert brief is not None and places(brief, "instructions") == [1]


def test_the_instructions_are_read_no_further_than_the_walk_needs() -> None:
    rows = [ask(seq, f"ask {seq}") for seq in range(1, 41)]
    rows += [row(seq, "t" * 4000) for seq in range(41, 44)]
    newest_first = rows[::-1]
    instructions = Strict([r for r in newest_first if r.kind == "chat_user"], allowed=11)
    brief = compose_brief(newest_first, 43, 43, instructions, 40)
    # One instruction to see the record leaves one out, then the part's ten (buffered).
    assert brief is not None and len(places(brief, "instructions")) == 10
    assert instructions.read == 10


# Budgets


def test_a_larger_budget_keeps_more_and_is_recorded() -> None:
    rows = agent_run(400)
    small, large = compose(rows), compose(rows, Budget(120, 40_000))
    assert small.budget == DEFAULT_BUDGET and large.budget == Budget(120, 40_000)
    assert large.rows > small.rows and large.chars > small.chars
    assert large.sha256 != small.sha256


@pytest.mark.parametrize("budget", [Budget(0, 0), Budget(-5, 10**9), Budget(True, 5),
                                    "60:12000", None, Budget(2**70, 2**70)])
def test_odd_budgets_never_raise_and_stay_within_bounds(budget: object) -> None:
    brief = compose_brief(agent_run(50)[::-1], 51, 51, None, 0, budget)  # type: ignore[arg-type]
    assert brief is not None and brief.rows >= 1
    assert 1 <= brief.budget.rows <= 1000 and 200 <= brief.budget.chars <= 100_000


def test_same_inputs_and_budget_give_the_same_bytes() -> None:
    rows = agent_run(200) + [ask(202, "more")]
    first, second = compose(rows, Budget(80, 20_000)), compose(list(rows), Budget(80, 20_000))
    assert first == second
    assert first.sha256 == hashlib.sha256(first.text.encode("utf-8")).hexdigest()


# A summary, when one was written, is shown and labelled, and changes nothing else


def test_a_summary_is_labelled_as_a_models_and_keeps_what_the_walk_kept() -> None:
    rows = agent_run(300)
    newest_first = rows[::-1]
    instructions = [rows[0]]
    plain = compose_brief(newest_first, 301, 301, instructions, 1)
    summary = Summary("qwen-coder", "The person asked for castling; tests were run.", 200, 62, 261)
    summed = compose_brief(newest_first, 301, 301, instructions, 1, summary=summary)
    assert plain is not None and summed is not None
    assert summed.entries == plain.entries and summed.rows == plain.rows
    assert summed.omitted_rows == plain.omitted_rows
    label = ("== a summary of 200 earlier entries left out (seq 62 to 261), written by the "
             "model qwen-coder; it may be wrong or miss what mattered ==")
    assert label in summed.text.split("\n")
    assert summed.text.count("The person asked for castling") == 1
    assert summed.text.index(CLOSE) < summed.text.index(label) < summed.text.index("\n== conv")
    assert plain.text == summed.text.replace(
        f"\n{label}\nThe person asked for castling; tests were run.\n== end of the summary ==\n",
        "")
    assert wording_violations(summed.text) == []


def test_a_summary_is_bounded_and_made_printable() -> None:
    summary = Summary("m\n" * 100, "s\x1b[31m" + "y" * 5000, 3, 1, 3)
    brief = compose_brief([row(5)], 5, 5, summary=summary)
    assert brief is not None
    assert "\x1b" not in brief.text and "\ufffd[31m" + "y" * 1994 + "\n== end" in brief.text
    assert "== a summary of 3 earlier entries" in brief.text


# Properties over generated agent runs


def model_walk(newest_first: list[BriefRow], rows: int, chars: int, entry: int) -> list[int]:
    """The contract's walk in its plainest form: (seq, kept) per kept entry."""
    room, kept = chars, []
    for r in newest_first:
        keep = min(len(r.content), entry)
        last = False
        if keep > room:
            if room < 200:
                break
            keep, last = room, True
        kept.append((r.seq, keep))
        room -= keep
        if last or len(kept) == rows:
            break
    return kept


steps = st.tuples(
    st.sampled_from(["chat_user", "chat_user", "chat_assistant", "terminal", "command", "brain"]),
    st.one_of(st.integers(0, 80), st.integers(150, 1300), st.integers(2000, 6000)),
    st.integers(0, 2),
)
runs = st.tuples(
    st.lists(steps, min_size=1, max_size=160),
    st.sampled_from([DEFAULT_BUDGET, Budget(11, 3200), Budget(25, 6000), Budget(120, 40_000)]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs)
def test_generated_runs_keep_every_rule_of_the_part(run: tuple[list, Budget]) -> None:
    spec, budget = run
    rows = [row(seq, "w" * length, kind=kind, session_id=f"csess_{conv}")
            for seq, (kind, length, conv) in enumerate(spec, start=1)]
    newest_first = rows[::-1]
    asks = [r for r in newest_first if r.kind == "chat_user"]
    brief = compose(rows, budget)
    whole = compose_brief(newest_first, len(rows), len(rows), budget=budget)
    assert whole is not None

    # Both parts share the budget; the overhead stays bounded.
    assert 1 <= brief.rows <= budget.rows and brief.chars <= budget.chars
    assert len(brief.text) - brief.chars <= MAX_OVERHEAD
    assert brief.omitted_rows == len(rows) - brief.rows
    assert wording_violations(brief.text) == []

    oldest_whole = min(e.seq for e in whole.entries)
    leaves_one_out = any(r.seq < oldest_whole for r in asks)
    part = places(brief, "instructions")
    if not leaves_one_out:
        assert brief.text == whole.text and not part
        return
    # The part: the plain model of the walk over instructions alone, 10 / 3,000 / 1,000.
    expected = model_walk(asks, 10, 3000, 1000)
    assert part == sorted(seq for seq, _ in expected)
    kept = {e.seq: e.chars for e in brief.entries if e.part == "instructions"}
    assert kept == dict(expected)
    # The record: contiguous, ends at the newest entry, walked with what the part left.
    in_record = sorted(places(brief, "record") + places(brief, "reference"))
    assert in_record == list(range(in_record[0], len(rows) + 1))
    assert set(places(brief, "reference")) == set(part) & set(in_record)
    rest = [r for r in newest_first if r.seq not in kept]
    record_expected = model_walk(rest, budget.rows - len(part),
                                 budget.chars - sum(kept.values()), 4000)
    shown_record = places(brief, "record")
    if len(shown_record) == len(record_expected):
        assert shown_record == sorted(seq for seq, _ in record_expected)
    else:  # only the overhead budget stops it earlier
        assert len(brief.text) - brief.chars > MAX_OVERHEAD - 200
    # The task: kept whenever at most 10 instructions exist and the first fits.
    if len(asks) <= 10 and len(asks[-1].content) <= 1000:
        if sum(min(len(r.content), 1000) for r in asks) <= 3000:
            assert asks[-1].seq in part
