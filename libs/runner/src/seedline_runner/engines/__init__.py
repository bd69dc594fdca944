"""Engine adapters: one interface, one small module per engine."""

from .base import Engine, EngineError, EngineOutput, StartResult, TurnResult
from .claude import ClaudeEngine
from .openai import OpenAIChatEngine
from .scripted import ScriptedEngine

__all__ = [
    "ClaudeEngine",
    "Engine",
    "EngineError",
    "EngineOutput",
    "OpenAIChatEngine",
    "ScriptedEngine",
    "StartResult",
    "TurnResult",
]
