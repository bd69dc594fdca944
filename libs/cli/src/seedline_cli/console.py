"""Where output goes: results on stdout, progress and errors on stderr."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console

if TYPE_CHECKING:  # a table is made by the command that prints one, not by `--help`
    from rich.table import Table

# soft_wrap: a printed command or path stays on one line, so it can be copied whole.
# emoji=False: text quoted from data (":memo:" in an entry) is printed as written, and the
# table of emoji codes (a sixth of a quick command's start-up) is never loaded.
out = Console(highlight=False, soft_wrap=True, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def print_json(value: Any) -> None:
    """Machine-readable output: plain JSON on stdout, never wrapped or coloured."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")
    sys.stdout.flush()


def add_id_column(table: Table, header: str, ids: list[str]) -> None:
    """A column of ids, never shortened: the next command needs the whole id.

    It is as wide as its longest id, so the other columns wrap instead of it.
    """
    width = max([len(header), *(len(i) for i in ids)])
    table.add_column(header, min_width=width, overflow="fold")


def add_text_column(table: Table, header: str) -> None:
    """A column that wraps long values rather than cutting them with an ellipsis."""
    table.add_column(header, overflow="fold")


def print_table(table: Table, console: Console | None = None) -> None:
    """A boxed table on stdout, its ids and words whole (keep_words_whole)."""
    console = console or out
    needed = keep_words_whole(table, console.width)
    if needed is not None:
        # Wider than the terminal even with every column at its longest word: printed
        # whole, and the terminal wraps its lines, rather than cut into pieces of words.
        table.width = needed
    console.print(table, crop=needed is None)


def keep_words_whole(table: Table, width: int | None = None) -> int | None:
    """Give each column of a boxed table at least its longest word when the table must
    shrink to fit the terminal, so cells wrap between words (`3 conversation(s)` once came
    out as `conversatio` / `n(s)`). Rich shrinks the widest columns first, whatever their
    words; here the room beyond each column's longest word is shared by how much more each
    would take. A table that fits as it is is left as it is. Returns None when it fits the
    terminal, else the width it needs with every column at its longest word (an id column
    at its longest id).
    """
    from rich.text import Text

    width = width or out.width
    lows: list[int] = []
    highs: list[int] = []
    for column in table.columns:
        lines = str(column.header).splitlines()
        for cell in column._cells:
            text = cell if isinstance(cell, Text) else (
                Text.from_markup(cell, emoji=False) if isinstance(cell, str) else Text(""))
            lines += text.plain.splitlines()
        low = max([len(word) for line in lines for word in line.split()] + [column.min_width or 0])
        lows.append(low)
        highs.append(max([len(line) for line in lines] + [low]))
    columns = len(table.columns)
    borders = 3 * columns + 1  # a space either side of each cell, and the borders
    room = width - borders
    if sum(highs) <= room:
        return None
    if sum(lows) > room:
        for column, low in zip(table.columns, lows):
            column.width = low
        return sum(lows) + borders
    spare, extra = room - sum(lows), [high - low for high, low in zip(highs, lows)]
    for column, low, more in zip(table.columns, lows, extra):
        column.width = low + spare * more // sum(extra)
    return None
