"""What a terminal shows: words wrap whole, and no control character from input reaches it."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from seedline_cli.console import add_id_column, add_text_column, keep_words_whole, print_table
from seedline_cli.rejected_cmd import visible


def _machines(words_whole: bool) -> str:
    table = Table(title="1 runner machine(s) online", title_justify="left")
    add_id_column(table, "machine", ["mac-mini-1"])
    for column in ("label", "engines", "stateless engines", "hosts", "last heartbeat"):
        add_text_column(table, column)
    table.add_row("mac-mini-1", "Your Mac mini in the office", "scripted, claude, codex, openai",
                  "openai", "3 conversation(s); only bd43f4de", "2 s ago")
    if words_whole:
        keep_words_whole(table)
    screen = io.StringIO()
    Console(file=screen, width=80, color_system=None).print(table)
    return screen.getvalue()


def test_narrow_tables_wrap_between_words():
    assert "conversation(s)" not in _machines(words_whole=False)  # how it used to come out
    shown = _machines(words_whole=True)
    for word in ("conversation(s);", "bd43f4de", "heartbeat", "stateless"):
        assert word in shown, shown


def test_a_table_too_wide_for_any_wrapping_keeps_its_ids_and_words_whole():
    machine = "the-long-named-build-machine-in-the-basement-rack-number-42"
    table = Table(title="1 runner machine(s) online", title_justify="left")
    add_id_column(table, "machine", [machine])
    for column in ("label", "engines", "hosts"):
        add_text_column(table, column)
    table.add_row(machine, "Basement build machine", "scripted", "1 conversation(s)")
    screen = io.StringIO()
    print_table(table, Console(file=screen, width=80, color_system=None))
    shown = screen.getvalue()
    for word in (machine, "Basement", "scripted", "conversation(s)"):
        assert word in shown, shown


def test_control_characters_are_shown_escaped_never_sent_to_the_terminal():
    assert visible("a\x00b\x1b[2Jc\rd\x7f") == "a\\x00b\\x1b[2Jc\\x0dd\\x7f"
    assert visible("line one\n\tindented") == "line one\n\tindented"
