"""The root command group: the checks that hold for every command, before any of them runs.

- Arguments must be UTF-8 text. Python hands undecodable bytes over as lone surrogates,
  which would fail later, deep in encoding, with a traceback.
- A usage error (a missing option, a number that is not one) of a command that has
  --json is JSON too when --json was given, like every other error of that command.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from .click_api import Command, Context
from .click_api import UsageError
from typer.core import TyperGroup

from . import plain_values
from .errors import USAGE, UsageProblem, report
from .lazy_commands import LazyCommand, LazyCommands, plugin_commands

JSON_FLAG = "--json"
FIRST = "up"
# The commands other packages add (their `seedline.commands` entry points), named here only
# to say which package to install when one is missing.
ELSEWHERE = {"up": "seedline-supervisor", "tokens": "seedline-web", "mcp": "seedline-web",
             "eval": "seed-composer", "docs": "seedline-devtools",
             "machines": "seedline-devtools"}
# A runner machine's install (seedline-cli without its `platform` extra) has these commands;
# the others read or drive the platform and need its packages.
MACHINE_COMMANDS = ("runner",)
PLATFORM_PACKAGES = ("seedline_platform", "seedline_core", "seedline_client")


def platform_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("seedline_platform") is not None


def not_utf8(args: Sequence[str]) -> UsageProblem | None:
    for index, arg in enumerate(args):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as exc:
            code = ord(arg[exc.start])
            what = f"byte 0x{code - 0xDC00:02X}" if 0xDC80 <= code <= 0xDCFF else "a character"
            readable = arg.encode("utf-8", errors="replace").decode("utf-8")
            previous = args[index - 1] if index else ""
            name = (f"The value of {previous}" if previous.startswith("-")
                    else f"Argument {index + 1}")
            return UsageProblem(
                f"{name} ({readable!r}) is not UTF-8 text: its {what} at position {exc.start} "
                "cannot be read. Seedline takes names and content as UTF-8 only; convert it "
                "first (for example with iconv), or pass content with --content-file."
            )
    return None


def invoked_command(root: Command, args: Sequence[str]) -> Command:
    """The command the arguments name (`brief show ...` names show), found without parsing
    them: a parse error may be what is being reported."""
    command = root
    tokens = iter(args)
    for arg in tokens:
        if arg.startswith("-"):
            if _takes_value(command, arg):
                next(tokens, None)
            continue
        commands = getattr(command, "commands", None)
        if not commands or arg not in commands:
            break
        command = commands[arg]
    return command


def _takes_value(command: Command, flag: str) -> bool:
    return any(
        flag in getattr(param, "opts", ()) and not getattr(param, "is_flag", False)
        for param in command.params
    )


def takes_json(command: Command) -> bool:
    return any(JSON_FLAG in getattr(param, "opts", ()) for param in command.params)


plain_values.install()


class SeedlineGroup(TyperGroup):
    _args: list[str] = []
    # The commands imported only when used (lazy_commands.py), in the order `--help` lists them.
    lazy: tuple[LazyCommand, ...] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._listing = False
        self._by_name = {c.name: c for c in self.lazy}
        self.commands = LazyCommands(self.commands, {c.name: c.load for c in self.lazy},
                                     plugin_commands)

    def list_commands(self, ctx: Context) -> list[str]:
        # `up` first, where a person starts (the README's first command), when it is here.
        names = list(self.commands)
        if not platform_installed():
            names = [name for name in names if name in MACHINE_COMMANDS]
        return sorted(names, key=lambda name: name != FIRST)

    def get_command(self, ctx: Context, name: str) -> Command | None:
        spec = self._by_name.get(name)
        if self._listing and spec is not None and not self.commands.is_loaded(name):
            return spec.placeholder()
        try:
            command = self.commands.get(name)
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] not in PLATFORM_PACKAGES:
                raise
            raise UsageError(
                f"`seedline {name}` reads or drives the platform, and this is a runner "
                "machine's install, without the platform's packages. Run it where the "
                "platform is installed, or add them here: uv tool install "
                "'seedline-cli[platform]'.", ctx) from None
        if command is None and name in ELSEWHERE:
            package = ELSEWHERE[name]
            raise UsageError(
                f"`seedline {name}` comes with the {package} package, which is not installed "
                f"here. Install it beside seedline-cli (pip install {package}), or use an "
                "installation of the whole of Seedline (`make install` in its repository).", ctx)
        return command

    def format_help(self, ctx: Context, formatter: Any) -> None:
        self._listing = True  # the listing needs names and summaries, not the modules
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def all_commands(self) -> dict[str, Command]:
        """Every command, each imported."""
        return dict(self.commands.items())

    def main(self, args: Sequence[str] | None = None, *rest: Any, **extra: Any) -> Any:
        self._args = list(sys.argv[1:] if args is None else args)
        problem = not_utf8(self._args)
        if problem is not None:
            report(problem, JSON_FLAG in self._args)
            sys.exit(USAGE)
        return super().main(self._args, *rest, **extra)

    def invoke(self, ctx: Context) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            if JSON_FLAG in self._args and takes_json(invoked_command(self, self._args)):
                report(UsageProblem(exc.format_message()), as_json=True)
                sys.exit(exc.exit_code)
            raise
