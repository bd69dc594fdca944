"""Exit codes scripts can rely on, and the errors that carry them."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import typer
from .click_api import ClickException


OK = 0
FAILED = 1
USAGE = 2
UNREACHABLE = 3

START_HINT = "Start the system with `make run` (or `seedline up`)"

F = TypeVar("F", bound=Callable)


class CliError(Exception):
    exit_code = FAILED
    code = "failed"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        # Facts beside the error for --json (publish --file: how many entries were stored).
        self.extra: dict = {}


class OperationFailed(CliError):
    exit_code = FAILED


class UsageProblem(CliError):
    exit_code = USAGE
    code = "invalid_request"


class Unreachable(CliError):
    exit_code = UNREACHABLE
    code = "unavailable"


def report(exc: CliError, as_json: bool) -> None:
    """An error for a person on stderr, or the contract's error reply on stdout for --json."""
    # Imported here: rich is not needed until there is something to print (start-up time).
    from .console import err, print_json

    if as_json:
        print_json({"ok": False, "error": {"code": exc.code, "message": exc.message},
                    **exc.extra})
    else:
        err.print(f"[bold red]Error:[/] {_escape(exc.message)}")


def reports_errors(command: F) -> F:
    """Turn a CliError, or anything unexpected, into one message and its exit code.

    With --json (a ``json_out`` parameter) the message is JSON on stdout, so a script
    reading stdout always gets JSON; the exit code is the same either way.
    """

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        as_json = bool(kwargs.get("json_out"))
        try:
            return command(*args, **kwargs)
        except CliError as exc:
            report(exc, as_json)
            raise typer.Exit(exc.exit_code) from None
        except (typer.Exit, typer.Abort, KeyboardInterrupt, ClickException):
            raise
        except Exception as exc:  # no traceback reaches a person
            report(unexpected(exc), as_json)
            raise typer.Exit(FAILED) from None

    return wrapper  # type: ignore[return-value]


def unexpected(exc: BaseException) -> CliError:
    return CliError(
        f"Something unexpected went wrong ({type(exc).__name__}: {exc}). Run the command "
        "again; if it happens again, report it with the command you ran.",
        code="internal_error",
    )


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
