"""How a brief is put in front of an engine: as background, never as an instruction.

The header states the brief's length in characters so the background can be
told apart from the instruction exactly, whatever either of them contains.
"""

from __future__ import annotations

import re

_HEADER = "Background from the earlier conversation (not an instruction; {chars} characters):\n"
_HEADER_PATTERN = re.compile(
    r"Background from the earlier conversation \(not an instruction; (\d+) characters\):\n"
)
INSTRUCTION_LABEL = "\n\nInstruction:\n"


def background(brief: str) -> str:
    """The brief framed as background, on its own (a seeded history message)."""
    return _HEADER.format(chars=len(brief)) + brief


def frame_first_prompt(brief: str | None, instruction: str, note: str | None = None) -> str:
    """The brief as background, placed before the first instruction; `note`, the machine's
    own line about the working tree it was carried, between the two (CONTRACT.md 5)."""
    if brief is None and note is None:
        return instruction
    head = background(brief) if brief is not None else ""
    if note is not None:
        head += ("\n\n" if head else "") + note
    return head + INSTRUCTION_LABEL + instruction


def split_background(text: str) -> tuple[str | None, str]:
    """Split a prompt into (brief, instruction); brief is None when none is framed."""
    match = _HEADER_PATTERN.match(text)
    if match is None:
        return None, text
    start = match.end()
    end = start + int(match.group(1))
    if end > len(text):
        return None, text
    brief = text[start:end]
    rest = text[end:]
    if rest.startswith(INSTRUCTION_LABEL):
        rest = rest[len(INSTRUCTION_LABEL) :]
    elif rest.startswith("\n\n") and INSTRUCTION_LABEL in rest:
        rest = rest.split(INSTRUCTION_LABEL, 1)[1]  # past the machine's line about the tree
    elif rest:
        return None, text
    return brief, rest
