"""A durable-execution journal's bytes for one conversation, as a model (no server).

Durable-execution systems that make an agent survive a crash (Temporal with the OpenAI
Agents SDK, Restate, Dapr Agents, Inngest, DBOS) journal every step's input and result.
In Temporal's OpenAI Agents integration each model call is an activity whose input is
the model's whole input: the instructions, the tools and every input item of the
conversation so far. Its history therefore holds the conversation once per model
call, and grows with the square of the number of calls; Temporal ends a workflow whose
history passes 50 MB (temporalio/sdk-python #1890: a chat of ~209k tokens ended at
model call 53 of 100, model-call inputs 99.8 % of the history).

This module writes the same conversation that bench.langgraph_compare stores in
Seedline into such a journal, event by event, and counts its bytes:

- one model call per assistant turn; its scheduled event carries the input items of
  every earlier turn plus the instructions (JSON, as the SDK's pydantic converter
  encodes them), its completed event the model's response (the assistant message);
- person messages as ``{"role": "user", "content": ...}``, assistant messages as the
  Responses API output item the SDK feeds back (``type: message``, ``output_text``);
- no tool definitions, no usage blocks and no per-event protobuf overhead: every
  figure here is a lower bound on what such a journal stores.

Seedline stores each entry once, so its bytes grow linearly with the turns.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

# Temporal's hard limit on one workflow's history (the default of its server).
HISTORY_LIMIT_BYTES = 50 * 1024 * 1024
INSTRUCTIONS = (
    "You are a coding agent working in the person's repository. Read files before you change"
    " them, run the tests after every change, and say what you did."
)


def _item(role: str, text: str, turn: int) -> dict:
    if role == "user":
        return {"role": "user", "content": text}
    return {
        "id": f"msg_{turn:08d}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _size(value) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def journal_bytes(turns: Iterable[tuple[str, str]]) -> list[int]:
    """Journal bytes after each turn (index 0 is after turn 1)."""
    out: list[int] = []
    total = 0
    items_bytes = 0  # the JSON of the input items so far, without the list's brackets
    for turn, (role, text) in enumerate(turns, 1):
        item = _item(role, text, turn)
        if role == "assistant":
            # The scheduled event: the model's whole input (every item so far).
            call_input = {"model_name": "gpt-5", "system_instructions": INSTRUCTIONS,
                          "model_settings": {}, "tools": [], "handoffs": []}
            total += _size(call_input) + len(',"input":[]') + items_bytes
            # The completed event: the model's response, this turn's message.
            total += _size({"output": [item], "response_id": f"resp_{turn:08d}"})
        items_bytes += _size(item) + (1 if items_bytes else 0)
        out.append(total)
    return out


def first_turn_over(limit: int, turns: list[tuple[str, str]]) -> int | None:
    """The first turn after which the journal holds more than `limit` bytes."""
    for turn, size in enumerate(journal_bytes(turns), 1):
        if size > limit:
            return turn
    return None
