"""The parts of click the CLI uses, from where typer keeps them.

Typer 0.29 carries its own copy of click as `typer._click` and names no public home for
its Command, Context, UsageError or ClickException; the command group and the error
handling need them. They are imported here, in one place, and
libs/cli/tests/test_click_api.py fails when typer moves them or makes them public.
"""

from __future__ import annotations

from typer._click import Command, Context
from typer._click.exceptions import ClickException, UsageError

__all__ = ["ClickException", "Command", "Context", "UsageError"]
