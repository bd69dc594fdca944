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

from typer._click import Command, Context
from typer._click.exceptions import UsageError
from typer.core import TyperGroup

from .errors import USAGE, UsageProblem, report

JSON_FLAG = "--json"


def not_utf8(args: Sequence[str]) -> UsageProblem | None:
    for position, arg in enumerate(args, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as exc:
            byte = ord(arg[exc.start]) - 0xDC00 if 0xDC80 <= ord(arg[exc.start]) <= 0xDCFF else None
            what = f"its byte 0x{byte:02X}" if byte is not None else "a character"
            readable = arg.encode("utf-8", errors="replace").decode("utf-8")
            return UsageProblem(
                f"Argument {position} ({readable!r}) is not UTF-8 text: {what} at position "
                f"{exc.start} cannot be read. Seedline takes names and content as UTF-8 only; "
                "convert it first (for example with iconv) or pass it with --content-file."
            )
    return None


def takes_json(command: Command | None) -> bool:
    return command is not None and any(
        JSON_FLAG in getattr(param, "opts", ()) for param in command.params
    )


class SeedlineGroup(TyperGroup):
    _args: list[str] = []

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
            failing = exc.ctx.command if exc.ctx is not None else None
            if JSON_FLAG in self._args and takes_json(failing):
                report(UsageProblem(exc.format_message()), as_json=True)
                sys.exit(exc.exit_code)
            raise
