"""Engine adapters: one interface, one small module per engine."""

from .base import (
    Emit,
    Engine,
    EngineError,
    EngineOutput,
    ResumeRefused,
    StartResult,
    TurnResult,
    announce_bound,
)
from .claude import ClaudeEngine
from .codex import CodexEngine
from .openai import OpenAIChatEngine
from .scripted import ScriptedEngine

__all__ = [
    "ClaudeEngine",
    "CodexEngine",
    "Emit",
    "Engine",
    "EngineError",
    "EngineOutput",
    "OpenAIChatEngine",
    "ResumeRefused",
    "ScriptedEngine",
    "StartResult",
    "TurnResult",
    "announce_bound",
]
