"""Settings for a command: the environment (Settings.from_env) plus root options."""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

import typer

from seedline_contracts.tokens import name_problem

from .errors import UsageProblem

if TYPE_CHECKING:
    from seedline_platform.settings import Settings


def load_settings(ctx: typer.Context | None = None) -> Settings:
    # Imported here: a runner machine's install has no platform, and `seedline runner`
    # imports this module for check_name.
    from seedline_platform.settings import Settings, SettingsError

    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        raise UsageProblem(str(exc)) from None
    overrides = (ctx.find_root().obj or {}) if ctx is not None else {}
    if overrides.get("nats_url"):
        settings = dataclasses.replace(settings, nats_url=overrides["nats_url"])
    return settings


def check_name(flag: str, value: str, example: str) -> str:
    """A value that becomes a subject token (instance, repo, conversation, machine)."""
    if value == "":
        raise UsageProblem(f"{flag} must not be empty; give a name such as {example}.")
    problem = name_problem(value)  # the contract's one rule for names
    if problem is not None:
        raise UsageProblem(f"{flag} {problem}.")
    return value


def safe_url(url: str) -> str:
    """A connection URL with any password hidden, fit to print."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


def conversation_flag(conversation: str | None, old_flag: str | None) -> str | None:
    """--conversation, or --session, its older name, kept working for scripts."""
    if conversation is not None and old_flag is not None and conversation != old_flag:
        raise UsageProblem("Give the conversation once, with --conversation.")
    return conversation if conversation is not None else old_flag
