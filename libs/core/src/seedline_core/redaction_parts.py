"""What every ruleset of secret detectors is built from (redaction.py). Pure: no I/O.

A recorded brief names the ruleset that redacted it and is replayed with it, so what
these functions do is part of every ruleset that uses them: a change here that changes
a single span is a new ruleset, not an edit (tests/test_secret_rulesets.py pins them).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

MARKER_PREFIX = "[secret left out: "
MARKER = re.compile(re.escape(MARKER_PREFIX) + r"[A-Za-z0-9 .'-]{1,60}\]")


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    kind: str


# A detector gets the text and its lower-case copy (same length): searching key words in
# the copy without IGNORECASE is ten times faster than with it.
Detector = Callable[[str, str], Iterator[Span]]
Finder = Callable[[str], Iterator[Span]]
# Around a key word, how far a keyword rule looks for its value (detect-secrets reads
# one line; a line can be a whole minified file).
AROUND = 300

_PLACEHOLDER = re.compile(
    r"""^(?:\$|%|<|\{|\[secret left out|\*+$|x+$|\.\.\.|…|changeme$|null$|none$|true$|false$)""",
    re.IGNORECASE,
)


def placeholder(value: str) -> bool:
    """A reference to a secret, a template or an elision is not a secret."""
    value = value.strip("\"'`")
    return len(value) < 4 or _PLACEHOLDER.search(value) is not None


def group_spans(
    pattern: re.Pattern[str], kind: str, group: int,
    keep: Callable[[str], bool] = lambda value: not placeholder(value),
) -> Finder:
    """Each match's `group` (its quotes taken off), when `keep` says it is a secret."""
    def find(text: str) -> Iterator[Span]:
        for match in pattern.finditer(text):
            start, end = match.span(group)
            if start < 0:
                continue
            value = text[start:end]
            if value[:1] in "\"'" and len(value) >= 2 and value[-1] == value[0]:
                start, end, value = start + 1, end - 1, value[1:-1]
            if start < end and (group == 0 or keep(value)):
                yield Span(start, end, kind)

    return find


def whole(find: Finder) -> Detector:
    return lambda text, lowered: find(text)


def near(trigger: re.Pattern[str], finders: tuple[Finder, ...], lowered: bool = True) -> Detector:
    """`finders` run only on the part of a line around each place `trigger` finds (in the
    lower-case copy when `lowered`). Every secret these rules find stands on one line
    next to its key word, and the full patterns cost a hundred times more per character
    than the search for the key words."""

    def find_near(text: str, lower: str) -> Iterator[Span]:
        windows: list[list[int]] = []
        for hit in trigger.finditer(lower if lowered else text):
            line_start = text.rfind("\n", 0, hit.start()) + 1
            line_end = text.find("\n", hit.end())
            line_end = len(text) if line_end < 0 else line_end
            start = max(line_start, hit.start() - AROUND)
            end = min(line_end, hit.end() + AROUND)
            if windows and start <= windows[-1][1] and line_start <= windows[-1][0]:
                windows[-1][1] = max(windows[-1][1], end)
            else:
                windows.append([start, end])
        for start, end in windows:
            part = text[start:end]
            for find in finders:
                for span in find(part):
                    yield Span(start + span.start, start + span.end, span.kind)

    return find_near


def lower(text: str) -> str:
    """A lower-case copy with the same offsets (str.lower lengthens a few characters)."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
