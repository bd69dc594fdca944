"""Seedline runner SDK: presence, launches, turns, engine adapters, conversation store."""

from .cli import CredentialsRefused, run_runner
from .checkouts import Checkouts
from .engines import (
    ClaudeEngine,
    CodexEngine,
    Engine,
    EngineError,
    EngineOutput,
    OpenAIChatEngine,
    ScriptedEngine,
    StartResult,
    TurnResult,
)
from .runner import Runner
from .store import Conversation, ConversationStore, SeedMessage, seed_if_empty

__all__ = [
    "Checkouts",
    "ClaudeEngine",
    "CodexEngine",
    "Conversation",
    "CredentialsRefused",
    "ConversationStore",
    "Engine",
    "EngineError",
    "EngineOutput",
    "OpenAIChatEngine",
    "Runner",
    "ScriptedEngine",
    "SeedMessage",
    "StartResult",
    "TurnResult",
    "run_runner",
    "seed_if_empty",
]
