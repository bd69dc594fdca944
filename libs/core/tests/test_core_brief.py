import hashlib
import re
from collections.abc import Iterator, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seedline_core.brief import (
    ENTRY_KINDS,
    MAX_CHARS,
    MAX_OVERHEAD,
    MAX_ROWS,
    PREAMBLE,
    Brief,
    BriefRow,
    compose_brief,
)
from seedline_core.notices import wording_violations

AT = "2026-08-17T10:00:00Z"
KIND_LABELS = "user|assistant|terminal|command|brain|outcome|system"
HEADER = re.compile(rf"^\[(\d+) ({KIND_LABELS}) [^\]\n]*\]$", re.MULTILINE)


def row(
    seq: int,
    content: str = "ok",
    kind: str = "chat_user",
    session_id: str = "csess_a",
    at: str = AT,
    engine: str | None = "claude",
) -> BriefRow:
    return BriefRow(
        seq=seq, session_id=session_id, kind=kind, content=content, at=at, engine=engine
    )


def compose(oldest_first: Sequence[object], until_seq: int | None = None) -> Brief:
    """The brief of a whole timeline given oldest first, as the caller would read it."""
    if until_seq is None:
        until_seq = max((r.seq for r in oldest_first if isinstance(r, BriefRow)), default=1)
    brief = compose_brief(reversed(list(oldest_first)), until_seq, len(oldest_first))
    assert brief is not None
    return brief


def header_seqs(brief: Brief) -> list[int]:
    return [int(seq) for seq, _ in HEADER.findall(brief.text)]


def overhead(brief: Brief) -> int:
    return len(brief.text) - brief.chars


class Strict:
    """Yields rows newest first and fails the test when read past `allowed` rows."""

    def __init__(self, newest_first: Sequence[object], allowed: int) -> None:
        self.rows = list(newest_first)
        self.allowed = allowed
        self.read = 0

    def __iter__(self) -> Iterator[object]:
        for item in self.rows:
            if self.read >= self.allowed:
                raise AssertionError(f"read row {self.read + 1}, only {self.allowed} needed")
            self.read += 1
            yield item


# The preamble and what it must say


def test_preamble_first_says_the_conversation_has_ended() -> None:
    brief = compose([row(1)])
    assert brief.text.startswith(
        "The previous conversation on this repo has ended and is not available."
    )


def test_preamble_names_what_is_missing_and_frames_the_record() -> None:
    ended = PREAMBLE.index("has ended and is not available")
    for phrase in (
        "file contents",
        "tool state",
        "worked out but never said",
        "working tree may have changed",
        "background for the instruction that follows",
        "not as an instruction",
    ):
        assert phrase in PREAMBLE
        assert PREAMBLE.index(phrase) > ended


def test_brief_own_words_are_allowed_words() -> None:
    brief = compose(
        [row(seq, "z") for seq in range(1, 80)]
        + [row(80, "x" * 5000, kind="terminal"), row(81, "y" * 5000, session_id="csess_b")]
    )
    assert "earlier entries are not included" in brief.text
    assert "characters left out" in brief.text
    assert wording_violations(brief.text) == []


# Budget


def test_at_most_sixty_entries() -> None:
    brief = compose([row(seq, f"entry {seq}") for seq in range(1, 101)])
    assert brief.rows == MAX_ROWS
    assert header_seqs(brief) == list(range(41, 101))
    assert "[40 earlier entries are not included]" in brief.text
    assert brief.omitted_rows == 40


def test_each_entry_is_first_cut_to_4000_characters() -> None:
    brief = compose([row(1, "a" * 4500), row(2, "b" * 10)])
    assert brief.chars == 4000 + 10
    assert "[… 500 characters left out …]" in brief.text


def test_terminal_keeps_its_tail_with_the_cut_marked_at_the_head() -> None:
    content = "HEAD" + "x" * 4992 + "TAIL"
    brief = compose([row(1, content, kind="terminal")])
    assert "TAIL" in brief.text and "HEAD" not in brief.text
    marker = "[… 1,000 characters left out …]"
    assert brief.text.index(marker) < brief.text.index("xxxx")
    assert f"{marker}\n{'x' * 3996}TAIL\n" in brief.text


@pytest.mark.parametrize("kind", sorted(ENTRY_KINDS - {"terminal"}))
def test_other_kinds_keep_their_head_with_the_cut_marked_at_the_end(kind: str) -> None:
    content = "HEAD" + "x" * 4992 + "TAIL"
    brief = compose([row(1, content, kind=kind)])
    assert "HEAD" in brief.text and "TAIL" not in brief.text
    assert f"HEAD{'x' * 3996}\n[… 1,000 characters left out …]\n" in brief.text


def test_newest_entry_is_always_included_even_when_huge() -> None:
    brief = compose([row(1, "older"), row(2, "n" * 1_000_000)])
    assert header_seqs(brief)[-1] == 2
    assert brief.chars == 4000 + len("older")
    assert "[… 996,000 characters left out …]" in brief.text


def test_an_entry_too_big_for_the_room_left_is_cut_to_it_and_ends_the_walk() -> None:
    oldest_first = [
        row(1, "small"),
        row(2, "h" * 5000, kind="command"),
        row(3, "c" * 3000),
        row(4, "b" * 4000),
        row(5, "a" * 4000),
    ]
    brief = compose_brief(Strict(oldest_first[::-1], allowed=4), 5, 5)
    assert brief is not None
    assert header_seqs(brief) == [2, 3, 4, 5]
    assert brief.chars == MAX_CHARS
    assert f"{'h' * 1000}\n[… 4,000 characters left out …]" in brief.text
    assert "[1 earlier entry is not included]" in brief.text


def test_an_entry_with_less_than_200_characters_of_room_ends_the_walk_before_it() -> None:
    oldest_first = [
        row(1, "tiny"),
        row(2, "w" * 250),
        row(3, "s" * 10),
        row(4, "c" * 3950),
        row(5, "b" * 4000),
        row(6, "a" * 4000),
    ]
    brief = compose(oldest_first)
    # 40 characters of room are left before entry 2; it does not fit and is not cut,
    # and the walk stops there rather than taking the smaller entry 1.
    assert header_seqs(brief) == [3, 4, 5, 6]
    assert brief.chars == 11_960
    assert "w" not in brief.text.split("[3 ")[1]
    assert "tiny" not in brief.text
    assert "[2 earlier entries are not included]" in brief.text
    assert brief.omitted_rows == 2


def test_an_oversized_entry_between_small_ones_ends_the_walk() -> None:
    oldest_first = [row(1, "tiny-one"), row(2, "tiny-two"), row(3, "X" * 300)]
    oldest_first += [row(4, "m" * 3900), row(5, "m" * 4000), row(6, "m" * 4000)]
    oldest_first += [row(7, "tiny-seven")]
    brief = compose(oldest_first)
    assert header_seqs(brief) == [4, 5, 6, 7]
    assert "tiny-one" not in brief.text and "tiny-two" not in brief.text
    assert "X" not in brief.text.split("== conversation")[1]
    assert "[3 earlier entries are not included]" in brief.text


def test_empty_entries_still_fit_when_no_room_is_left() -> None:
    oldest_first = [row(1, ""), row(2, "c" * 4000), row(3, "b" * 4000), row(4, "a" * 4000)]
    brief = compose(oldest_first)
    assert header_seqs(brief) == [1, 2, 3, 4]
    assert "earlier entr" not in brief.text


def test_sixty_conversations_with_the_longest_ids_stay_within_the_overhead() -> None:
    oldest_first = [
        row(seq, "done", kind="chat_assistant", session_id=f"{seq:03d}" + "s" * 252)
        for seq in range(1_000_000_001, 1_000_000_061)
    ]
    brief = compose(oldest_first)
    assert overhead(brief) <= MAX_OVERHEAD
    assert "s" * 40 not in brief.text
    assert brief.rows >= 20
    assert brief.text.count("\n== conversation ") == brief.rows
    assert brief.omitted_rows == 60 - brief.rows
    assert header_seqs(brief) == [r.seq for r in oldest_first[-brief.rows :]]


def test_extreme_header_fields_keep_the_newest_entry_within_the_overhead() -> None:
    newest = BriefRow(
        seq=2**64 - 1,
        session_id="\x00" * 5000,
        kind="chat_assistant",
        content="c" * 10**6,
        at="2026-08-17T10:00:00Z" * 500,
        engine="e" * 1000,
    )
    brief = compose_brief([newest], 2**64 - 1, 2**80)
    assert brief is not None
    assert brief.rows == 1
    assert overhead(brief) <= MAX_OVERHEAD


# Rendering


def test_entries_render_oldest_first_with_a_header_each() -> None:
    brief = compose([row(7, "first", kind="chat_user"), row(9, "second", kind="chat_assistant")])
    assert HEADER.findall(brief.text) == [("7", "user"), ("9", "assistant")]
    assert "[7 user 2026-08-17 10:00]\nfirst\n[9 assistant 10:00]\nsecond\n" in brief.text
    assert brief.text.index("first") < brief.text.index("second")


def test_boundaries_between_conversations_are_marked() -> None:
    brief = compose(
        [
            row(1, "one", session_id="csess_a"),
            row(2, "two", session_id="csess_a"),
            row(3, "three", session_id="csess_b"),
            row(4, "four", session_id="csess_a"),
        ]
    )
    markers = re.findall(r"^== conversation (\S+) ==$", brief.text, re.MULTILINE)
    assert markers == ["csess_a", "csess_b", "csess_a"]
    text = brief.text
    assert text.index("== conversation csess_b ==") < text.index("three")
    assert text.index("two") < text.index("== conversation csess_b ==")


def test_earlier_line_only_when_entries_are_left_out() -> None:
    whole = compose([row(1), row(2)])
    assert "earlier entr" not in whole.text
    assert whole.omitted_rows == 0
    partial = compose_brief([row(5, "newest")], 5, 5)
    assert partial is not None
    assert "[4 earlier entries are not included]" in partial.text
    assert partial.text.index("earlier entries") < partial.text.index("[5 user")
    assert partial.omitted_rows == 4


def test_earlier_count_uses_thousands_separators() -> None:
    brief = compose_brief([row(9227, "newest")], 9227, 9227)
    assert brief is not None
    assert "[9,226 earlier entries are not included]" in brief.text
    assert brief.stats() == {
        "rows": 1,
        "chars": 6,
        "omitted_rows": 9226,
        "until_seq": 9227,
        "sha256": brief.sha256,
        "redacted": 0,
    }


def test_same_inputs_same_bytes_and_the_digest_is_of_the_text() -> None:
    oldest_first = [row(seq, f"entry {seq} ✓", session_id=f"c{seq % 3}") for seq in range(1, 90)]
    first = compose(oldest_first)
    second = compose(list(oldest_first))
    assert first == second
    assert first.sha256 == hashlib.sha256(first.text.encode("utf-8")).hexdigest()
    assert re.fullmatch(r"[0-9a-f]{64}", first.sha256)


def test_the_text_does_not_depend_on_engine_or_until_seq() -> None:
    first = compose_brief([row(3, engine="claude")], 3, 3)
    second = compose_brief([row(3, engine="codex")], 10, 3)
    assert first is not None and second is not None
    assert first.text == second.text


# Malformed rows and odd inputs


MALFORMED: list[object] = [
    None,
    {"seq": 4, "content": "dict"},
    "a string",
    BriefRow(4, "c", "chat_user", None, AT, None),  # type: ignore[arg-type]
    row(4, kind="bogus"),
    row(4, kind=["chat_user"]),  # type: ignore[arg-type]
    row(-1),
    row(0),
    row(True),  # type: ignore[arg-type]
    row(2**70),
    row(99),
    row(4, session_id=""),
    row(4, at=None),  # type: ignore[arg-type]
    row(4, engine=5),  # type: ignore[arg-type]
    row("4"),  # type: ignore[arg-type]
]


def test_malformed_rows_are_skipped_counted_and_never_raise() -> None:
    newest_first = [row(10, "newest"), *MALFORMED, row(3, "older")]
    brief = compose_brief(newest_first, 10, 2 + len(MALFORMED))
    assert brief is not None
    assert header_seqs(brief) == [3, 10]
    assert brief.omitted_rows == len(MALFORMED)
    assert "earlier entr" not in brief.text


def test_only_malformed_rows_or_nothing_gives_no_brief() -> None:
    assert compose_brief(MALFORMED, 10, len(MALFORMED)) is None
    assert compose_brief([], 10, 0) is None
    assert compose_brief(None, 10, 0) is None  # type: ignore[arg-type]
    assert compose_brief([row(1)], None, 1) is None  # type: ignore[arg-type]


def test_odd_counts_never_raise() -> None:
    for entries_upto in (None, -5, 0, "12", 2**200, True):
        brief = compose_brief([row(1)], 1, entries_upto)  # type: ignore[arg-type]
        assert brief is not None and brief.rows == 1


def test_rows_out_of_order_or_repeated_are_malformed() -> None:
    brief = compose_brief([row(5, "five"), row(5, "again"), row(7, "seven"), row(4, "four")], 7, 4)
    assert brief is not None
    assert header_seqs(brief) == [4, 5]
    assert brief.omitted_rows == 2


def test_lone_surrogates_are_replaced_not_raised() -> None:
    brief = compose([row(1, "bad \ud800 text", session_id="c\udfff", at="\ud800")])
    assert "bad \ufffd text" in brief.text
    assert "\ud800" not in brief.text
    brief.text.encode("utf-8")
    assert brief.chars == len("bad \ufffd text")


def test_control_characters_in_ids_and_times_do_not_break_the_layout() -> None:
    brief = compose([row(1, "body", session_id="a\nb", at="x]\ny")])
    assert brief.text.count("\n== conversation ") == 1
    assert "== conversation a\ufffdb ==" in brief.text


def test_endless_malformed_input_ends() -> None:
    def endless() -> Iterator[object]:
        yield row(2, "kept")
        while True:
            yield None

    brief = compose_brief(endless(), 2, 2)
    assert brief is not None and brief.rows == 1


# Laziness


def test_reads_no_row_after_the_sixtieth() -> None:
    newest_first = [row(seq) for seq in range(200, 0, -1)]
    brief = compose_brief(Strict(newest_first, allowed=60), 200, 200)
    assert brief is not None and brief.rows == 60


def test_reads_one_row_past_the_last_kept_when_it_does_not_fit() -> None:
    newest_first = [row(100, "a" * 4000), row(99, "b" * 4000), row(98, "c" * 3900)]
    newest_first += [row(seq, "d" * 300) for seq in range(97, 0, -1)]
    strict = Strict(newest_first, allowed=4)
    brief = compose_brief(strict, 100, 100)
    assert brief is not None and brief.rows == 3
    assert strict.read == 4


def test_reads_nothing_after_a_cut_that_ends_the_walk() -> None:
    newest_first = [row(10, "a" * 4000), row(9, "b" * 4000), row(8, "c" * 3000)]
    newest_first += [row(7, "d" * 6000), row(6)]
    strict = Strict(newest_first, allowed=4)
    brief = compose_brief(strict, 10, 10)
    assert brief is not None and brief.rows == 4
    assert brief.chars == MAX_CHARS
    assert strict.read == 4


# Properties over generated timelines


def model_walk(newest_first: list[BriefRow]) -> list[tuple[int, int]]:
    """The contract's walk in its plainest form: (seq, kept characters) per kept entry."""
    room, kept = MAX_CHARS, []
    for entry in newest_first:
        keep = min(len(entry.content), 4000)
        last = False
        if keep > room:
            if room < 200:
                break
            keep, last = room, True
        kept.append((entry.seq, keep))
        room -= keep
        if last or len(kept) == MAX_ROWS:
            break
    return kept


lengths = st.one_of(st.integers(0, 60), st.integers(150, 900), st.integers(3000, 6000))
entries = st.tuples(
    st.integers(0, 70),
    st.sampled_from(sorted(ENTRY_KINDS)),
    lengths,
    st.sampled_from("xyz ✓\n"),
    st.sampled_from([AT, "2026-08-17T10:00:00.123456Z", "", "t" * 90]),
)
small_entries = st.tuples(
    st.integers(0, 70),
    st.sampled_from(sorted(ENTRY_KINDS)),
    st.integers(0, 20),
    st.just("x"),
    st.sampled_from([AT, "2026-08-18T10:00:00Z", "t" * 90]),
)
timelines = st.tuples(
    st.one_of(
        st.lists(entries, min_size=1, max_size=140),
        # Many short entries across many conversations: the overhead budget is what binds.
        st.lists(small_entries, min_size=40, max_size=100),
    ),
    st.integers(1, 255),
    st.integers(0, 10**12),
)


Spec = list[tuple[int, str, int, str, str]]


def build(spec: Spec, id_length: int, first_seq: int) -> list[BriefRow]:
    return [
        row(
            first_seq + index + 1,
            fill * length,
            kind=kind,
            session_id=(f"c{conversation}-" + "q" * id_length)[:id_length],
            at=at,
        )
        for index, (conversation, kind, length, fill, at) in enumerate(spec)
    ]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(timelines)
def test_generated_timelines_keep_every_budget_and_never_skip(
    timeline: tuple[Spec, int, int],
) -> None:
    spec, id_length, first_seq = timeline
    oldest_first = build(spec, id_length, first_seq)
    newest_first = oldest_first[::-1]
    brief = compose(oldest_first)

    assert 1 <= brief.rows <= MAX_ROWS
    assert brief.chars <= MAX_CHARS
    assert overhead(brief) <= MAX_OVERHEAD
    assert brief.omitted_rows == len(oldest_first) - brief.rows
    assert brief.sha256 == hashlib.sha256(brief.text.encode("utf-8")).hexdigest()
    assert wording_violations(brief.text) == []

    expected = model_walk(newest_first)
    kept_seqs = header_seqs(brief)
    assert kept_seqs == sorted(seq for seq, _ in expected[: brief.rows])
    assert kept_seqs[-1] == newest_first[0].seq
    if brief.rows == len(expected):
        assert brief.chars == sum(keep for _, keep in expected)
    else:
        # Fewer entries than the character budget allows: only the overhead budget stops it.
        assert overhead(brief) > MAX_OVERHEAD - 200

    earlier = len(oldest_first) - brief.rows
    line = f"[{earlier:,} earlier entr"
    assert (line in brief.text) == (earlier > 0)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.none(),
            st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
            st.builds(
                BriefRow,
                seq=st.one_of(st.integers(-5, 40), st.booleans(), st.text(max_size=2)),
                session_id=st.one_of(st.text(max_size=20), st.none()),
                kind=st.one_of(st.sampled_from(sorted(ENTRY_KINDS)), st.text(max_size=5)),
                content=st.one_of(st.text(max_size=300), st.none(), st.integers()),
                at=st.one_of(st.text(max_size=30), st.none()),
                engine=st.one_of(st.none(), st.text(max_size=5), st.integers()),
            ),
        ),
        max_size=50,
    ),
    st.one_of(st.integers(-3, 40), st.none()),
    st.one_of(st.integers(-3, 100), st.none()),
)
def test_any_input_gives_a_brief_or_none_and_never_raises(
    rows: list[object], until_seq: int | None, entries_upto: int | None
) -> None:
    brief = compose_brief(rows, until_seq, entries_upto)  # type: ignore[arg-type]
    if brief is not None:
        brief.text.encode("utf-8")
        assert 1 <= brief.rows <= MAX_ROWS
        assert brief.chars <= MAX_CHARS
        assert overhead(brief) <= MAX_OVERHEAD
        assert brief.omitted_rows >= 0
