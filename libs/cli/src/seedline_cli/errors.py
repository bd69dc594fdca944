"""Exit codes scripts can rely on, and the errors that carry them."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import typer

from .console import err

OK = 0
FAILED = 1
USAGE = 2
UNREACHABLE = 3

START_HINT = "Start the system with `make run` (or `seedline up`)"

F = TypeVar("F", bound=Callable)


class CliError(Exception):
    exit_code = FAILED

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class OperationFailed(CliError):
    exit_code = FAILED


class UsageProblem(CliError):
    exit_code = USAGE


class Unreachable(CliError):
    exit_code = UNREACHABLE


def reports_errors(command: F) -> F:
    """Turn a CliError into its message on stderr and its exit code."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except CliError as exc:
            err.print(f"[bold red]Error:[/] {_escape(exc.message)}")
            raise typer.Exit(exc.exit_code) from None

    return wrapper  # type: ignore[return-value]


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
