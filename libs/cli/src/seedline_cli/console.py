"""Where output goes: results on stdout, progress and errors on stderr."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

# soft_wrap: a printed command or path stays on one line, so it can be copied whole.
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


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


def keep_words_whole(table: Table, width: int | None = None) -> Table:
    """Give each column of a boxed table at least its longest word when the table must
    shrink to fit the terminal, so cells wrap between words (`3 conversation(s)` once came
    out as `conversatio` / `n(s)`). Rich shrinks the widest columns first, whatever their
    words; here the room beyond each column's longest word is shared by how much more each
    would take. A table that fits as it is is left as it is.
    """
    from rich.text import Text

    width = width or out.width
    lows: list[int] = []
    highs: list[int] = []
    for column in table.columns:
        lines = str(column.header).splitlines()
        for cell in column._cells:
            text = cell if isinstance(cell, Text) else (
                Text.from_markup(cell) if isinstance(cell, str) else Text(""))
            lines += text.plain.splitlines()
        low = max([len(word) for line in lines for word in line.split()] + [column.min_width or 0])
        lows.append(low)
        highs.append(max([len(line) for line in lines] + [low]))
    columns = len(table.columns)
    room = width - 3 * columns - 1  # a space either side of each cell, and the borders
    if sum(highs) <= room:
        return table
    if sum(lows) > room:
        # Wider than the terminal whatever is done (a long machine id): id columns keep
        # their width (the next command needs the whole id) and the others share what is
        # left by their longest word, folding inside a word where they must.
        ids = [bool(column.min_width) for column in table.columns]
        left = max(room - sum(low for low, is_id in zip(lows, ids) if is_id), 0)
        others = sum(low for low, is_id in zip(lows, ids) if not is_id) or 1
        widths = [low if is_id else max(left * low // others, min(low, 4))
                  for low, is_id in zip(lows, ids)]
        # The floors above can add up past the room; take the excess from the widest of the
        # other columns, never from an id (Rich would otherwise shrink every column alike).
        while sum(widths) > room and any(w > 1 and not i for w, i in zip(widths, ids)):
            widest = max((w, n) for n, (w, i) in enumerate(zip(widths, ids)) if not i)[1]
            widths[widest] -= 1
        for column, width in zip(table.columns, widths):
            column.width = width
        return table
    spare, extra = room - sum(lows), [high - low for high, low in zip(highs, lows)]
    for column, low, more in zip(table.columns, lows, extra):
        column.width = low + spare * more // sum(extra)
    return table
