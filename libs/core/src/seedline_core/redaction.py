"""Secrets left out of text that leaves the instance (CONTRACT.md 5). Pure: no I/O.

An agent's terminal output holds secrets (an `.env` printed, a token in a URL, a
private key), and a brief carries that history to another machine and often to
another vendor's model. Every span a detector recognises becomes
``[secret left out: <kind>]``; the rest of the text is kept byte for byte, and no
character outside a secret is taken.

Detectors come in numbered rulesets. A brief records the ruleset it was redacted with
and a replay uses that one, so a recorded brief keeps its bytes whatever ruleset is the
newest: ruleset 1 (redaction_v1: detect-secrets 1.5.0's plugins and Seedline's rules)
and ruleset 2 (redaction_v2: Betterleaks' rules and Seedline's, chosen on measured
recall; README, "Secrets"). ``RULESET`` is the one new briefs use; a replay of a brief
recorded without one redacts nothing, as it was composed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from seedline_core.redaction_parts import MARKER, MARKER_PREFIX, Detector, Span, lower

__all__ = ["MARKER_PREFIX", "RULESET", "RULESETS", "Redacted", "Span", "find_secrets",
           "load_detectors", "marker", "redact"]

RULESET = 2


def _v1() -> tuple[Detector, ...]:
    from seedline_core import redaction_v1

    return redaction_v1.detectors()


def _v2() -> tuple[Detector, ...]:
    from seedline_core import redaction_v2

    return redaction_v2.detectors()


# Imported on first use: each pulls in a scanner of its own.
RULESETS: dict[int, Callable[[], tuple[Detector, ...]]] = {1: _v1, 2: _v2}


def marker(kind: str) -> str:
    return f"{MARKER_PREFIX}{kind}]"


@dataclass(frozen=True)
class Redacted:
    text: str
    # Where each marker stands in `text`, in order: a cut can then keep or drop a marker
    # whole and count only those it keeps.
    markers: tuple[tuple[int, int], ...]

    @property
    def count(self) -> int:
        return len(self.markers)


def _detectors(ruleset: int) -> tuple[Detector, ...]:
    try:
        build = RULESETS[ruleset]
    except KeyError:
        raise ValueError(
            f"Secret ruleset {ruleset} is unknown here (this version knows "
            f"{', '.join(map(str, RULESETS))}): a brief recorded with it cannot be replayed "
            "by this version."
        ) from None
    return build()


def load_detectors(ruleset: int = RULESET) -> None:
    """Import and build a ruleset's detectors now rather than on the first text redacted."""
    _detectors(ruleset)


def find_secrets(text: str, ruleset: int = RULESET) -> list[Span]:
    """The secret spans of `text`, in order, overlapping ones merged (of two starting
    together, the more specific detector names the span: the ruleset lists them in that
    order). A marker already in the text is never redacted again."""
    if not text:
        return []
    kept = [m.span() for m in MARKER.finditer(text)]
    found: list[tuple[int, int, int, str]] = []
    lowered = lower(text)
    for order, detect in enumerate(_detectors(ruleset)):
        for span in detect(text, lowered):
            if not any(span.start < end and start < span.end for start, end in kept):
                found.append((span.start, order, span.end, span.kind))
    merged: list[Span] = []
    for start, _, end, kind in sorted(found):
        if merged and start < merged[-1].end:
            last = merged[-1]
            merged[-1] = Span(last.start, max(last.end, end), last.kind)
        else:
            merged.append(Span(start, end, kind))
    return merged


def redact(text: str, ruleset: int = RULESET) -> Redacted:
    """`text` with every secret span replaced by its marker."""
    spans = find_secrets(text, ruleset)
    if not spans:
        return Redacted(text, ())
    parts: list[str] = []
    markers: list[tuple[int, int]] = []
    at = 0
    length = 0
    for span in spans:
        parts.append(text[at:span.start])
        length += span.start - at
        shown = marker(span.kind)
        parts.append(shown)
        markers.append((length, length + len(shown)))
        length += len(shown)
        at = span.end
    parts.append(text[at:])
    return Redacted("".join(parts), tuple(markers))
