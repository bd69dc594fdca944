"""Commands imported when they are run, not when `seedline` starts.

Importing every command module at start-up pulled in FastAPI, FastStream, psycopg and the
services' code for `seedline --help` (1.5 s on a quiet machine, 9.9 s under load). The root
group lists each command from a table (name, module, one-line help) and imports a module
only when its command runs, or when someone asks for all of them (`all_commands`).

Other packages add commands of their own through the ``seedline.commands`` entry point group
(the supervisor's `up`, the web's `tokens` and `mcp`, the composer's `eval`, the developer
tools' `docs`), so this package depends on none of them. Their entry points are read only
when a name is not one of this package's own, or when every command is listed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from .click_api import Command

PLUGIN_GROUP = "seedline.commands"


@dataclass(frozen=True)
class LazyCommand:
    name: str
    module: str  # under seedline_cli
    attribute: str  # a command function, or a typer.Typer of subcommands
    summary: str  # what `seedline --help` shows; a test keeps it equal to the command's own
    hidden: bool = False

    def load(self) -> Command:
        module = importlib.import_module(f"seedline_cli.{self.module}")
        return as_command(self.name, getattr(module, self.attribute), self.hidden)

    def placeholder(self) -> Command:
        """What the help listing needs of it: its name and its summary."""
        from typer.core import TyperCommand

        return TyperCommand(self.name, help=self.summary, short_help=self.summary,
                            hidden=self.hidden)


def as_command(name: str, target: object, hidden: bool = False) -> Command:
    """A command function or a typer.Typer of subcommands, as the click command `name`."""
    import typer
    import typer.main

    # Built as a child of a throwaway group, so that a Typer of one subcommand stays a group.
    parent = typer.Typer()
    parent.callback()(lambda: None)
    if isinstance(target, typer.Typer):
        parent.add_typer(target, name=name, hidden=hidden)
    else:
        parent.command(name, hidden=hidden)(target)
    return typer.main.get_command(parent).commands[name]


def plugin_commands() -> dict[str, Callable[[], Command]]:
    """The commands other installed packages add, by name, each imported on first use."""
    from importlib.metadata import entry_points

    return {point.name: (lambda point=point: summarised(as_command(point.name, point.load())))
            for point in sorted(entry_points(group=PLUGIN_GROUP), key=lambda p: p.name)}


def summarised(command: Command) -> Command:
    """The listing shows the first paragraph of its help whole, as it shows this package's."""
    if not command.short_help and command.help:
        command.short_help = command.help.split("\n\n")[0].strip()
    return command


class LazyCommands(dict):
    """A group's commands: every name is there from the start, each command is imported on
    first use of its value. The plugins' names join the first time a name is not found or the
    names are listed."""

    def __init__(self, loaded: dict[str, Command], lazy: dict[str, Callable[[], Command]],
                 plugins: Callable[[], dict[str, Callable[[], Command]]] = dict):
        super().__init__(loaded)
        self._lazy = dict(lazy)
        self._plugins: Callable[[], dict[str, Callable[[], Command]]] | None = plugins
        for name in lazy:
            dict.__setitem__(self, name, None)

    def with_plugins(self) -> LazyCommands:
        if self._plugins is not None:
            found, self._plugins = self._plugins(), None
            for name, load in found.items():
                if not dict.__contains__(self, name):  # an own command keeps its name
                    self._lazy[name] = load
                    dict.__setitem__(self, name, None)
        return self

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or dict.__contains__(self.with_plugins(), name)

    def __iter__(self):
        return dict.__iter__(self.with_plugins())

    def __len__(self) -> int:
        return dict.__len__(self.with_plugins())

    def __getitem__(self, name: str) -> Command:
        if name not in self:
            raise KeyError(name)
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
