"""NATS subject matching, for the edges that check a subject against a filter."""

from __future__ import annotations


def subject_matches(subject: str, pattern: str) -> bool:
    """NATS subject matching: `*` is one token, a final `>` one or more."""
    tokens, wanted = subject.split("."), pattern.split(".")
    for i, want in enumerate(wanted):
        if want == ">":
            return len(tokens) > i
        if i >= len(tokens) or (want != "*" and want != tokens[i]):
            return False
    return len(tokens) == len(wanted)
