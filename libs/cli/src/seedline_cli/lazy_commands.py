"""Commands imported when they are run, not when `seedline` starts.

Importing every command module at start-up pulled in FastAPI, FastStream, psycopg and the
services' code for `seedline --help` (1.5 s on a quiet machine, 9.9 s under load). The root
group lists each command from a table (name, module, one-line help) and imports a module
only when its command runs, or when someone asks for all of them (`all_commands`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from typer._click import Command


@dataclass(frozen=True)
class LazyCommand:
    name: str
    module: str  # under seedline_cli
    attribute: str  # a command function, or a typer.Typer of subcommands
    summary: str  # what `seedline --help` shows; a test keeps it equal to the command's own
    hidden: bool = False

    def load(self) -> Command:
        import typer
        import typer.main

        target = getattr(importlib.import_module(f"seedline_cli.{self.module}"), self.attribute)
        # Built as a child of a throwaway group, so that a Typer of one subcommand stays a group.
        parent = typer.Typer()
        parent.callback()(lambda: None)
        if isinstance(target, typer.Typer):
            parent.add_typer(target, name=self.name, hidden=self.hidden)
        else:
            parent.command(self.name, hidden=self.hidden)(target)
        return typer.main.get_command(parent).commands[self.name]

    def placeholder(self) -> Command:
        """What the help listing needs of it: its name and its summary."""
        from typer.core import TyperCommand

        return TyperCommand(self.name, help=self.summary, short_help=self.summary,
                            hidden=self.hidden)


class LazyCommands(dict):
    """A group's commands: every name is there from the start, each command is imported on
    first use of its value."""

    def __init__(self, loaded: dict[str, Command], lazy: dict[str, Callable[[], Command]]):
        super().__init__(loaded)
        self._lazy = dict(lazy)
        for name in lazy:
            dict.__setitem__(self, name, None)

    def __getitem__(self, name: str) -> Command:
        if name in self._lazy:
            dict.__setitem__(self, name, self._lazy.pop(name)())
        return dict.__getitem__(self, name)

    def get(self, name, default=None):
        return self[name] if name in self else default

    def items(self):
        return [(name, self[name]) for name in self]

    def values(self):
        return [self[name] for name in self]

    def is_loaded(self, name: str) -> bool:
        return name not in self._lazy
