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
