"""Reading a corpus of transcripts and measuring the brief the composer makes of each.

A corpus is JSON Lines: one transcript per line, a JSON list of [kind, content] rows
in timeline order. Each transcript becomes one repo's timeline (seq 1, 2, ...) and its
brief is composed by the seed-composer's own code over the rows in memory, as an open
would compose it right after the last row.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import IO

from seedline_contracts.events import ContinuityDecided, LaunchPlan
from seedline_contracts.sessions import Continuity
from seedline_core.brief import (
    ENTRY_KINDS,
    INSTRUCTION_CHARS,
    INSTRUCTION_ENTRY_CHARS,
    INSTRUCTION_ROWS,
    MIN_PARTIAL_CHARS,
    Brief,
    BriefRow,
    Budget,
)

from .brief_of_decision import compose_for
from .reader import RowsReader

# The timeline keeps at most this much of an entry (CONTRACT.md 2.1).
MAX_CONTENT_CHARS = 100_000
MAX_LINE_BYTES = 64 * 1024 * 1024
MAX_ROWS = 100_000
TOOL_KINDS = frozenset({"terminal", "command"})

_INSTANCE, _REPO, _SESSION = "eval", "eval/transcript", "csess_transcript"
_AT = "2026-08-17T10:00:00Z"


class Malformed(ValueError):
    """A corpus line that is not a transcript; the message says why."""


@dataclass(frozen=True)
class Measure:
    line: int
    rows: int
    instructions: int
    rows_kept: int
    chars_kept: int
    instructions_part: bool
    contiguous: bool
    newest: bool
    # None when the transcript holds no instruction at all.
    last_instruction: bool | None
    task: bool | None
    tool_share: float
    task_fits: bool

    def to_json(self) -> dict:
        return asdict(self)


def lines_of(stream: IO[bytes]) -> Iterator[tuple[int, int, bytes | None]]:
    """(line number, bytes read, the line or None when too long), reading a bounded amount."""
    number = 0
    while True:
        line = stream.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        number += 1
        size = len(line)
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while (rest := stream.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                size += len(rest)
            yield number, size + len(rest), None
            continue
        yield number, size, line


def transcript(line: bytes) -> list[tuple[str, str]]:
    """The rows of a corpus line, or Malformed saying what is wrong with it."""
    try:
        value = json.loads(line)
    except UnicodeDecodeError:
        raise Malformed("it is not UTF-8") from None
    except ValueError as exc:
        raise Malformed(f"it is not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(value, list):
        raise Malformed("it is not a JSON list of [kind, content] rows")
    if not value:
        raise Malformed("it holds no rows")
    if len(value) > MAX_ROWS:
        raise Malformed(f"it holds {len(value):,} rows, more than the {MAX_ROWS:,} read")
    rows = []
    for index, item in enumerate(value, start=1):
        if not (isinstance(item, list) and len(item) == 2
                and all(isinstance(part, str) for part in item)):
            raise Malformed(f"row {index} is not a [kind, content] pair of strings")
        kind, content = item
        if kind not in ENTRY_KINDS:
            raise Malformed(f"row {index} has the kind {kind[:40]!r}, not one of "
                            f"{', '.join(sorted(ENTRY_KINDS))}")
        rows.append((kind, content[:MAX_CONTENT_CHARS].replace("\x00", "\ufffd")))
    return rows


def _decision(count: int) -> ContinuityDecided:
    continuity = Continuity(mode="fresh", resume_from=None, reason_code="no_previous",
                            reason="no earlier conversation on this repo")
    plan = LaunchPlan(instance_id=_INSTANCE, repo=_REPO, engine="eval", node_id="eval",
                      continuity=continuity, resume_key=None, instruction=None,
                      clean_slate=False)
    return ContinuityDecided(session_id="csess_eval", at=_AT, continuity=continuity,
                             seed_source="timeline", until_seq=count, entries_upto=count,
                             plan=plan)


async def brief_of(rows: list[tuple[str, str]], budget: Budget) -> Brief | None:
    """The brief the composer makes of a timeline holding these rows, seq 1 onwards."""
    timeline = [
        (_INSTANCE, _REPO, BriefRow(seq, _SESSION, kind, content, _AT, None))
        for seq, (kind, content) in enumerate(rows, start=1)
    ]
    return await compose_for(_decision(len(rows)), RowsReader(timeline), budget)


def measure(line: int, rows: list[tuple[str, str]], brief: Brief | None,
            budget: Budget) -> Measure:
    asks = [seq for seq, (kind, _) in enumerate(rows, start=1) if kind == "chat_user"]
    entries = brief.entries if brief is not None else ()
    held = {e.seq for e in entries if e.part != "reference"}
    in_record = sorted(e.seq for e in entries if e.part != "instructions")
    contiguous = bool(in_record) and in_record == list(range(in_record[0], len(rows) + 1))
    tool_chars = sum(e.chars for e in entries
                     if e.part != "reference" and e.kind in TOOL_KINDS)
    return Measure(
        line=line,
        rows=len(rows),
        instructions=len(asks),
        rows_kept=brief.rows if brief else 0,
        chars_kept=brief.chars if brief else 0,
        instructions_part=bool(brief and brief.has_instructions_part),
        contiguous=contiguous,
        newest=len(rows) in in_record,
        last_instruction=asks[-1] in held if asks else None,
        task=asks[0] in held if asks else None,
        tool_share=round(tool_chars / budget.chars, 4),
        task_fits=task_fits([rows[seq - 1][1] for seq in asks], budget),
    )


def task_fits(instructions: list[str], budget: Budget) -> bool:
    """Whether at most ten instructions were given and the instructions part, walked from
    the newest, reaches the first of them (CONTRACT.md 5): then the brief holds it."""
    if not instructions or len(instructions) > INSTRUCTION_ROWS:
        return False
    room = min(INSTRUCTION_CHARS, budget.chars - MIN_PARTIAL_CHARS)
    for content in reversed(instructions[1:]):
        keep = min(len(content), INSTRUCTION_ENTRY_CHARS)
        if keep > room:
            return False
        room -= keep
    return min(len(instructions[0]), INSTRUCTION_ENTRY_CHARS) <= room or room >= MIN_PARTIAL_CHARS


def _count(measures: list[Measure], field: str) -> dict[str, int]:
    values = [getattr(m, field) for m in measures if getattr(m, field) is not None]
    return {"present": sum(values), "of": len(values)}


def totals(measures: list[Measure], budget: Budget) -> dict:
    count = len(measures)
    fitting = [m for m in measures if m.task_fits]
    return {
        "transcripts": count,
        "rows": sum(m.rows for m in measures),
        "rows_kept": sum(m.rows_kept for m in measures),
        "chars_kept": sum(m.chars_kept for m in measures),
        "mean_rows_kept": round(sum(m.rows_kept for m in measures) / count, 1) if count else 0,
        "mean_chars_kept": round(sum(m.chars_kept for m in measures) / count) if count else 0,
        "instructions_part": sum(m.instructions_part for m in measures),
        "contiguous": {"present": sum(m.contiguous for m in measures), "of": count},
        "newest": {"present": sum(m.newest for m in measures), "of": count},
        "last_instruction": _count(measures, "last_instruction"),
        "task": _count(measures, "task"),
        # The contract's promise: at most 10 instructions and the first within 1,000.
        "task_where_it_fits": {"present": sum(bool(m.task) for m in fitting),
                               "of": len(fitting)},
        "tool_share": round(sum(m.tool_share for m in measures) / count, 4) if count else 0,
        "budget": {"rows": budget.rows, "chars": budget.chars},
    }
