"""How a tool call that failed or was refused reads in the timeline.

The timeline has no kind of its own for it: the tool's output stays a ``terminal``
entry, and its text starts with one mark, the same whether a runner published it live
or ``seedline import`` read it from the engine's transcript, so a brief shows at a
glance which commands failed instead of presenting their output as ordinary.
"""

from __future__ import annotations

TOOL_ERROR_MARK = "[tool error]"


def failed_tool_text(output: str) -> str:
    """The output of a failed or refused tool call, marked as such."""
    text = output.strip("\n")
    return f"{TOOL_ERROR_MARK} {text}" if text.strip() else TOOL_ERROR_MARK


def is_failed_tool_text(text: str) -> bool:
    return text.startswith(TOOL_ERROR_MARK)
