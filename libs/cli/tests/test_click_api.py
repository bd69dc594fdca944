"""Where the CLI takes click's classes from still holds them, and typer's commands are
those classes (so a command group built on them is one typer runs)."""

from __future__ import annotations

import typer
from typer.core import TyperCommand, TyperGroup

from seedline_cli import click_api


def test_typer_commands_are_the_click_classes_the_cli_takes():
    assert issubclass(TyperCommand, click_api.Command)
    assert issubclass(TyperGroup, click_api.Command)
    assert issubclass(click_api.UsageError, click_api.ClickException)
    # A public home would make click_api's private import unnecessary.
    assert not hasattr(typer, "Command") and not hasattr(typer, "UsageError")
